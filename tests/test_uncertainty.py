"""Monte Carlo win probabilities (costs.fit.uncertainty) on cases whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest

from costs.fit import uncertainty as unc


def test_no_uncertainty_gives_the_nominal_winner():
    c = np.array([3.0, 2.0, 2.5])
    r = unc.win_probability(c, np.zeros(3), np.ones(3), np.arange(3), 0.0, 0.0, draws=50)
    np.testing.assert_array_equal(r.win, [0, 1, 0])


def test_two_equal_plans_on_independent_devices_split_the_wins():
    r = unc.win_probability(np.ones(2), np.zeros(2), np.ones(2), np.array([0, 1]), 0.2, 0.0, draws=4000)
    assert r.win.sum() == pytest.approx(1.0)
    assert r.win[0] == pytest.approx(0.5, abs=0.03)
    # same device group: they move together, the tie stays broken the same way every draw
    r = unc.win_probability(np.array([1.0, 1.001]), np.zeros(2), np.ones(2), np.zeros(2, int), 0.2, 0.0)
    np.testing.assert_array_equal(r.win, [1, 0])


def test_win_probability_matches_the_normal_cdf():
    # plan 0 is 10% faster; log-ratio of two independent log-normals has sd 0.1 * sqrt(2)
    from scipy.stats import norm

    r = unc.win_probability(
        np.array([1.0, 1.1]), np.zeros(2), np.ones(2), np.array([0, 1]), 0.1, 0.0, draws=20000, seed=1
    )
    want = norm.cdf(np.log(1.1) / (0.1 * np.sqrt(2)))
    assert r.win[0] == pytest.approx(want, abs=0.01)


def test_candidates_and_objective_weights():
    c = np.array([1.0, 2.0, 0.5])
    w = np.array([1.0, 0.4, 1.0])  # plan 1 needs fewer iterations: objective 0.8 vs 1.0
    r = unc.win_probability(
        c, np.zeros(3), w, np.arange(3), 0.0, 0.0, candidates=np.array([True, True, False])
    )
    np.testing.assert_array_equal(r.win, [0, 1, 0])


def test_sd_from_interval():
    assert unc.sd_from_interval(
        np.exp(-1.2815515655446004), np.exp(1.2815515655446004), 0.8
    ) == pytest.approx(1.0)


def test_a_floor_no_draw_moves_keeps_tied_plans_tied():
    # two plans bound by the same data loader (floor 2.0): the GPUs' speed does not matter, so
    # the first one (lower objective weight) wins every draw
    r = unc.win_probability(
        np.array([0.5, 0.25]),
        np.zeros(2),
        np.array([1.0, 1.001]),
        np.array([0, 1]),
        0.2,
        0.0,
        floor_s=np.array([2.0, 2.0]),
    )
    np.testing.assert_array_equal(r.win, [1, 0])


def test_ties_go_to_the_lower_tiebreak():
    # three plans within 0.1% of each other on three devices; with a 0.5% tie step the cheapest
    # (tiebreak 1) wins unless its device's draw pushes it out of the tie step
    c = np.array([1.000, 1.0005, 1.001])
    r = unc.win_probability(
        c, np.zeros(3), np.ones(3), np.arange(3), 0.0, 0.0, tiebreak=np.array([3.0, 1.0, 2.0]), tie=5e-3
    )
    np.testing.assert_array_equal(r.win, [0, 1, 0])
