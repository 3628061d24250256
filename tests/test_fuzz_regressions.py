"""Every example of the "Hardened inputs" report, as a regression case: each is refused in one
line (exit 2) or answered correctly, within the stated time and memory, writing nothing when
refused (tests/fuzz_contract.py)."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import socket
import time
from pathlib import Path

import pytest
from fuzz_contract import files_under, fresh, run_cli

from planner.catalog import configs_dir
from planner.request import bounds
from planner.search import journal, shared

GPT2 = {
    "model_type": "gpt2",
    "n_layer": 12,
    "n_embd": 768,
    "n_head": 12,
    "vocab_size": 50257,
    "n_positions": 1024,
}
NOT_UTF8 = b"\xff\xfe\x00garbage\x80"


def _file(folder: Path, name: str, content) -> Path:
    path = folder / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def _measurements(folder: Path, edit=None, *, bom=False, crlf=False, n: int | None = 8) -> Path:
    """The shipped cnn.csv's first ``n`` rows (None: all), one cell edited: (row, column, value)."""
    text = (configs_dir() / "measurements" / "cnn.csv").read_text()
    rows = list(csv.reader(io.StringIO(text)))[: None if n is None else n + 1]
    if edit:
        r, column, value = edit
        rows[r][rows[0].index(column)] = value
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n" if crlf else "\n").writerows(rows)
    return _file(folder, "m.csv", ("\ufeff" if bom else "") + buf.getvalue())


def _plan(folder: Path) -> Path:
    plan = {"net": "alexnet", "device": "T4", "workers": 8, "gpus_per_node": 8, "batch_per_worker": 64}
    plan |= {"parallel": "data", "scheme": "ring", "precision": "fp16", "network": "eth100"}
    return _file(folder, "plan.json", plan)


# (name, argv builder given a fresh folder, words the one error line must hold)
REFUSED = [
    (
        "budget 10^20 GPUs",
        lambda d: ["optimize", "alexnet", "--budget", "99999999999999999999gpus"],
        ["--budget", "16,384"],
    ),
    (
        "budget 10^5 GPUs",
        lambda d: ["optimize", "alexnet", "--budget", "100000gpus"],
        ["100000gpus", "16,384"],
    ),
    ("budget 10^7 GPUs", lambda d: ["optimize", "alexnet", "--budget", "10000000gpus"], ["16,384"]),
    (
        "config.json of 10^12 layers",
        lambda d: ["estimate", _file(d, "c.json", {**GPT2, "n_layer": 10**12}), "--workers", "8"],
        ["n_layers", "1000000000000", "4,096"],
    ),
    (
        "config.json hidden size 10^30",
        lambda d: ["estimate", _file(d, "c.json", {**GPT2, "n_embd": 10**30}), "--workers", "8"],
        ["n_embd", "1000000000000000000000000000000"],  # its heads cannot divide it
    ),
    (
        "config.json 7 heads of 768",
        lambda d: ["estimate", _file(d, "c.json", {**GPT2, "n_head": 7}), "--workers", "8"],
        ["n_head", "7", "768"],
    ),
    (
        "net spec not UTF-8",
        lambda d: ["estimate", _file(d, "n.json", NOT_UTF8), "--workers", "8"],
        ["not UTF-8"],
    ),
    (
        "sweep YAML not UTF-8",
        lambda d: ["sweep", "status", _file(d, "s.yaml", NOT_UTF8), "--results", d / "r"],
        ["not UTF-8"],
    ),
    (
        "profile not UTF-8",
        lambda d: ["estimate", "alexnet", "--workers", "8", "--calibration", _file(d, "p.toml", NOT_UTF8)],
        ["not UTF-8"],
    ),
    (
        "plan not UTF-8",
        lambda d: ["launch", _file(d, "p.json", NOT_UTF8), "--target", "torchrun", "--out", d / "l"],
        ["not UTF-8"],
    ),
    ("report folder not UTF-8", lambda d: ["report", _file(d, "run.json", NOT_UTF8).parent], ["not UTF-8"]),
    (
        "net spec nested 10^5 deep",
        lambda d: ["estimate", _file(d, "n.json", "[" * 100000 + "]" * 100000), "--workers", "8"],
        ["nests deeper", "64"],
    ),
    (
        "plan nested 10^5 deep",
        lambda d: [
            "launch",
            _file(d, "p.json", "[" * 100000 + "]" * 100000),
            "--target",
            "torchrun",
            "--out",
            d / "l",
        ],
        ["nests deeper"],
    ),
    (
        "--workers beyond int64",
        lambda d: ["estimate", "alexnet", "--workers", "9" * 23],
        ["--workers", "16,384"],
    ),
    (
        "--batch beyond int64",
        lambda d: ["estimate", "alexnet", "--workers", "8", "--batch", "9" * 23],
        ["--batch"],
    ),
    (
        "--global-batch beyond int64",
        lambda d: ["optimize", "alexnet", "--budget", "16gpus", "--global-batch", "9" * 23],
        ["--global-batch", "16,777,216"],
    ),
    ("--workers range from 0", lambda d: ["estimate", "alexnet", "--workers", "0-8"], ["--workers"]),
    (
        "launch --out /proc/x",
        lambda d: ["launch", _plan(d), "--target", "torchrun", "--out", "/proc/x"],
        ["/proc"],
    ),
    (
        "calibrate -o /proc/x.toml",
        lambda d: ["calibrate", _measurements(d), "--no-loso", "-o", "/proc/x.toml"],
        ["-o"],
    ),
    (
        "validate --results /proc/x",
        lambda d: ["validate", _measurements(d), "--results", "/proc/x"],
        ["--results"],
    ),
    (
        "optimize --out /proc/x",
        lambda d: ["optimize", "alexnet", "--budget", "4gpus", "--out", "/proc/x"],
        ["--out"],
    ),
    (
        "CSV value 1e308",
        lambda d: ["calibrate", _measurements(d, (1, "value", "1e308")), "--no-loso"],
        ["row 1", "'value'", "peak"],
    ),
    (
        "CSV value 0",
        lambda d: ["validate", _measurements(d, (2, "value", "0")), "--out", d / "v"],
        ["row 2", "value"],
    ),
    (
        "CSV value -5",
        lambda d: ["validate", _measurements(d, (2, "value", "-5")), "--out", d / "v"],
        ["row 2"],
    ),
    (
        "CSV value nan",
        lambda d: ["validate", _measurements(d, (3, "value", "nan")), "--out", d / "v"],
        ["row 3"],
    ),
    (
        "CSV value inf",
        lambda d: ["validate", _measurements(d, (3, "value", "inf")), "--out", d / "v"],
        ["row 3"],
    ),
    (
        "--price T4=nan",
        lambda d: ["optimize", "alexnet", "--budget", "8gpus", "--price", "T4=nan"],
        ["T4=nan"],
    ),
    (
        "--price T4=inf",
        lambda d: ["optimize", "alexnet", "--budget", "8gpus", "--price", "T4=inf"],
        ["T4=inf"],
    ),
    (
        "estimate --seq-len 0",
        lambda d: ["estimate", "gpt2-xl", "--workers", "8", "--seq-len", "0"],
        ["--seq-len"],
    ),
    (
        "--timeout nan",
        lambda d: ["optimize", "alexnet", "--budget", "8gpus", "--timeout", "nan"],
        ["--timeout", "nan"],
    ),
    (
        "profile with a misspelt table",
        lambda d: [
            "estimate",
            "alexnet",
            "--workers",
            "8",
            "--calibration",
            _file(
                d,
                "p.toml",
                (configs_dir() / "profiles" / "default.toml").read_text().replace("[scale]", "[scael]"),
            ),
        ],
        ["[scael]"],
    ),
    (
        "profile with an inverted interval",
        lambda d: [
            "estimate",
            "alexnet",
            "--workers",
            "8",
            "--calibration",
            _file(
                d,
                "p.toml",
                re.sub(  # the shipped interval, its ends swapped (whatever the refit gave)
                    r"^interval = \[([0-9.]+), ([0-9.]+)\]",
                    r"interval = [\2, \1]",
                    (configs_dir() / "profiles" / "default.toml").read_text(),
                    count=1,
                    flags=re.M,
                ),
            ),
        ],
        ["interval", "low <= high"],
    ),
    (
        "--seed -1",
        lambda d: ["optimize", "alexnet", "--budget", "8gpus", "--seed", "-1"],
        ["--seed", "-1", "4,294,967,295"],
    ),
    (
        "pareto over a space of 29 million plans",
        lambda d: ["pareto", "alexnet", "--budget", "16384gpus", "--out", d / "p"],
        ["23,215,008", "500,000"],
    ),
    (
        "sweep status on a storage that cannot be opened",
        lambda d: [
            "sweep",
            "status",
            _file(d, "s.yaml", "name: s\nstorage: sqlite:////proc/nope/x.db\ngrid: {net: [alexnet]}\n"),
            "--results",
            d / "r",
        ],
        ["cannot be opened"],
    ),
    ("a folder as the net", lambda d: ["estimate", str(d), "--workers", "8"], ["folder"]),
    (
        "duplicate YAML keys",
        lambda d: ["sweep", "status", _file(d, "s.yaml", "name: a\nname: b\n"), "--results", d / "r"],
        ["twice"],
    ),
    (
        "YAML alias bomb in options.prices",
        lambda d: [
            "sweep",
            "status",
            _file(
                d,
                "s.yaml",
                "name: s\ngrid: {net: [alexnet]}\noptions:\n  prices: [&a [x,x,x,x,x,x,x,x,x], "
                + ", ".join(f"&{b} [{','.join([f'*{a}'] * 9)}]" for a, b in zip("abcdefg", "bcdefgh"))
                + "]\n",
            ),
            "--results",
            d / "r",
        ],
        ["aliases", "100,000"],
    ),
    (
        "sweep grid of 10^9 cells",
        lambda d: [
            "sweep",
            "status",
            _file(
                d,
                "s.yaml",
                "name: s\ngrid:\n  net: [alexnet]\n"
                + f"  budget: [{', '.join(f'{i}gpus' for i in range(1, 1001))}]\n"
                + f"  deadline: [{', '.join(f'{i}h' for i in range(1, 1001))}]\n"
                + f"  pue: [{', '.join(str(1 + i / 1000) for i in range(1000))}]\n",
            ),
            "--results",
            d / "r",
        ],
        ["1,000,000,000", "1,024"],
    ),
]


@pytest.mark.parametrize("name, argv, words", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_in_one_line(capsys, tmp_path, monkeypatch, name, argv, words):
    monkeypatch.chdir(tmp_path)
    folder = fresh(tmp_path)
    args = argv(folder)
    before = files_under(tmp_path)
    code, _, err = run_cli(capsys, args, codes=(2,))
    for word in words:
        assert word in err, f"{name}: '{word}' not in {err!r}"
    assert files_under(tmp_path) == before  # nothing written


def test_a_symlink_loop_as_the_net_is_named_a_loop(capsys, tmp_path):
    (tmp_path / "a.json").symlink_to(tmp_path / "b.json")
    (tmp_path / "b.json").symlink_to(tmp_path / "a.json")
    _, _, err = run_cli(capsys, ["estimate", tmp_path / "a.json", "--workers", "8"], codes=(2,))
    assert "loop" in err


def test_a_csv_field_over_128_kib_is_read(capsys, tmp_path):
    """Python's csv module stops at 128 KiB a field; the bound is 1 MiB (a note may be long)."""
    path = _measurements(tmp_path, (1, "notes", "x" * 200 * 1024))
    run_cli(capsys, ["validate", path, "--out", tmp_path / "v"], codes=(0,))
    big = _measurements(tmp_path, (1, "notes", "x" * (bounds.MAX_CSV_FIELD + 1)))
    _, _, err = run_cli(capsys, ["validate", big, "--out", tmp_path / "w"], codes=(2,))
    assert "row 1" in err and f"{bounds.MAX_CSV_FIELD:,}" in err


@pytest.mark.parametrize("bom, crlf", [(True, False), (False, True), (True, True)])
def test_bom_and_crlf_are_read_like_plain_csv(capsys, tmp_path, bom, crlf):
    plain = run_cli(
        capsys, ["validate", _measurements(fresh(tmp_path)), "--out", tmp_path / "a"], codes=(0,)
    )[1]
    other = _measurements(fresh(tmp_path), bom=bom, crlf=crlf)
    text = run_cli(capsys, ["validate", other, "--out", tmp_path / "b"], codes=(0,))[1]
    assert text.splitlines()[:-1] == plain.splitlines()[:-1]  # all but the line naming the folder


def test_formula_cells_are_neutralised_in_written_csv(capsys, tmp_path):
    path = _measurements(tmp_path, (1, "source", '=HYPERLINK("http://x")'))
    run_cli(capsys, ["validate", path, "--out", tmp_path / "v"], codes=(0,))
    rows = list(csv.DictReader(io.StringIO((tmp_path / "v" / "predictions.csv").read_text())))
    assert rows[0]["source"] == '\'=HYPERLINK("http://x")'
    assert all(not r["source"].startswith(("=", "+", "@")) for r in rows)


def test_calibrate_will_not_save_a_fit_worse_than_the_defaults(capsys, tmp_path):
    """Runs a thousand times too slow (plausible values: below any peak) pull the fit away from
    the cited defaults: it is refused on stderr, exit 1, and no profile is written."""
    rows = list(csv.reader(io.StringIO((configs_dir() / "measurements" / "cnn.csv").read_text())))
    value = rows[0].index("value")
    for i, r in enumerate(rows[1:], start=1):
        if i % 3 == 0:
            r[value] = str(float(r[value]) / 1000)
    buf = io.StringIO()
    csv.writer(buf).writerows(rows)
    path = _file(tmp_path, "m.csv", buf.getvalue())
    _, _, err = run_cli(capsys, ["calibrate", path, "--no-loso", "-o", tmp_path / "p.toml"], codes=(1,))
    assert "worse in sample than the cited defaults" in err and "not saved" in err
    assert not (tmp_path / "p.toml").exists()


def test_calibrate_says_when_it_replaces_a_profile(capsys, tmp_path):
    target = _file(tmp_path, "p.toml", "x = 1\n")
    path = _measurements(tmp_path, n=None)  # a fit on 8 runs can be worse in sample than none
    _, _, err = run_cli(capsys, ["calibrate", path, "--no-loso", "-o", target], codes=(0,))
    assert "replacing it" in err and "[scale]" in target.read_text()


def test_a_sweep_whose_storage_cannot_be_opened_leaves_nothing(capsys, tmp_path):
    spec = _file(
        tmp_path,
        "s.yaml",
        "name: s\ntrials: 4\nstorage: sqlite:////proc/nope/x.db\ngrid: {net: [alexnet], budget: [4gpus]}\n"
        "options: {gpu: T4}\n",
    )
    _, _, err = run_cli(capsys, ["sweep", "run", spec, "--results", tmp_path / "r"], codes=(2,))
    assert "cannot be opened" in err
    assert not (tmp_path / "r").exists()


def _dead_pid() -> int:
    """A pid that runs no process now."""
    pid = os.getpid() + 100_000
    while os.path.exists(f"/proc/{pid}"):
        pid += 1
    return pid


def test_a_killed_owners_journal_lock_is_taken_over_at_once(capsys, tmp_path):
    journal_file = tmp_path / "j.journal"
    argv = ["optimize", "alexnet", "--budget", "4gpus", "--gpu", "T4", "--storage", f"journal:{journal_file}"]
    argv += ["--study-name", "s", "--trials", "16", "--out", tmp_path / "r"]
    run_cli(capsys, argv, codes=(0,))
    lock = Path(f"{journal_file}.lock")
    lock.symlink_to(f"{socket.gethostname()}:{_dead_pid()}:12345")  # what a SIGKILLed owner leaves
    start = time.perf_counter()
    _, _, err = run_cli(capsys, [*argv[:-4], "--study-name", "s", "--trials", "32"], codes=(0,))
    assert time.perf_counter() - start < 15  # Optuna's own lock waits 30 s, silently
    assert "removed the journal lock" in err and "no longer running" in err
    assert not lock.exists()


def test_a_lock_of_unknown_owner_is_waited_on_saying_so(tmp_path, capsys):
    lock = tmp_path / "j.journal.lock"
    lock.symlink_to(str(tmp_path / "j.journal"))  # Optuna's own lock: no owner named
    start = time.perf_counter()
    assert journal.acquire(str(lock), grace_s=1.5)
    assert 1.5 <= time.perf_counter() - start < 10
    err = capsys.readouterr().err
    assert "waiting for the journal lock" in err and "removed the journal lock" in err
    assert os.readlink(lock) == shared.owner()  # the lock now names this process
