"""The cost model a request asked for: rule set, calibration profile and optimizer, turned
into the evaluator's keyword arguments for given device and link tables.

PALEO's rule sets take no extra arguments (their knobs, PPP and pipelining, are plan
columns). The ``modern`` rule set takes its efficiencies (the cited defaults of
configs/efficiencies.toml scaled by a calibration profile) and its options (optimizer, DDP
bucket size).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from costs.comm.ranks import MEGATRON
from costs.hardware import DeviceTable, LinkTable
from costs.modern.evaluator import Options
from costs.rules import get_rules
from planner import catalog
from planner.calibrate import profile as profiles

LOADERS = ("auto", "cpu", "dali", "none")
# catalog loader entries (configs/efficiencies.toml [loader.*]) behind each --data-loader choice
_LOADER_ENTRY = {"cpu": "cpu_jpeg", "dali": "gpu_dali"}


# Spread (RMS of log(predicted / measured)) of a prediction for a GPU generation the calibration
# has no run of, per net family: leave-one-generation-out, each generation of cnn.csv and llm.csv
# predicted by a fit from the cited defaults on the others, and the B200 runs no shipped fit has
# seen (benchmarks/leave_one_generation_out.py, run 2026-11-25 with cnn.csv's Ada Lovelace runs,
# again with NeMo 24.07's GPT-3 175B runs costed with their fused attention):
# CNNs 0.114-0.447 over six generations (median 0.254); transformers 0.349 (Ampere), 0.518
# (Hopper), 1.007 (Blackwell), median 0.518, all three over-predicted (+35% to +154%); every
# held-out generation, 0.349.
UNSEEN_SD_LOG = {"cnn": 0.254, "transformer": 0.518, "all": 0.349}
# An answer without --stack predicts with its family's default stack, but the run it stands for
# may be of any stack: its interval is widened to the envelope of every shipped stack's 80%
# interval of measured / predicted under the default stack's profile, measured on the shipped
# runs by planner/calibrate/spread.py (rerun 2026-11-25 after the megatron and default refits
# with Megatron-Core's 2024 README runs costed with their interleaved schedule; intervals from
# split-conformal ranks, costs.fit.calibration.tail_quantiles; tests/test_interval_coverage.py
# checks the figures against the data). CNNs (default optimized-cnn): eager PyTorch runs 79%
# slower at the median; transformers (default megatron): fsdp 21%, eager PyTorch 66% slower.
BETWEEN_STACKS = {"cnn": (0.3291, 1.2259), "transformer": (0.4136, 1.0913)}
Z80 = 1.2816  # the standard normal's 90th percentile: an 80% two-sided interval


@dataclass(frozen=True)
class CostModel:
    """Rule set + profile + optimizer + data loader. ``calibration`` None: the shipped default
    profile. ``loader``: cpu (JPEG decoding on the host's cores), dali (GPU decoding) or none."""

    rules: str
    calibration: str | None = None
    optimizer: str = "momentum"
    loader: str = "none"
    family: str = "all"  # cnn | transformer: which held-out error the interval is (all: every run)
    profile: profiles.Profile = field(default=profiles.EMPTY, compare=False)
    # --stack as asked (None: the net family's default); after for_net, the stack's name
    stack: str | None = None
    stacks: tuple[str, ...] = ()  # the stacks resolved by for_net (several: a searched axis)
    stack_profiles: tuple = field(default=(), compare=False)  # the profile of each of ``stacks``
    # planner.hosts.HostArrays of the plans' device rows (None: every plan on the assumed host)
    hosts: object = field(default=None, compare=False)
    image_scale: float = 1.0  # pixels per image over the net's published size (--image-size)
    # False when the answer's stack is its family's default, not one the request named (nor a
    # --calibration profile): its interval then covers the spread between stacks
    stack_known: bool = True
    fabric: str = "nonblocking"  # --fabric: the network's tiers between nodes (planner.fabrics)
    rank_order: str = MEGATRON  # --rank-order: which GPUs each parallel group occupies (costs.comm.ranks)

    @classmethod
    def of(
        cls,
        rules: str,
        calibration: str | None = None,
        optimizer: str = "momentum",
        loader: str = "none",
        stack: str | None = None,
        fabric: str | None = None,
        rank_order: str | None = None,
    ) -> CostModel:
        """Validate the names and load the profile once (one-line errors for bad ones)."""
        from planner import fabrics
        from planner.errors import BadInput

        modern = get_rules(rules).modern
        if calibration and not modern:
            raise BadInput(f"--calibration applies to the modern rule set, not {rules}")
        if stack is not None and not modern:
            raise BadInput(f"--stack applies to the modern rule set, not {rules}")
        if loader not in LOADERS:
            raise BadInput(f"--data-loader '{loader}' (valid: {', '.join(LOADERS)})")
        fab = fabrics.get(fabric).key
        if fab != fabrics.DEFAULT and not modern:
            raise BadInput(f"--fabric applies to the modern rule set, not {rules} (valid: {fabrics.DEFAULT})")
        order = fabrics.rank_order(rank_order)
        if order != MEGATRON and not modern:
            raise BadInput(f"--rank-order applies to the modern rule set, not {rules} (valid: {MEGATRON})")
        prof = profiles.EMPTY
        if modern:
            prof = profiles.load(calibration) if calibration else default_profile()
        loader = loader if modern else "none"
        return cls(
            rules, calibration, optimizer, loader, profile=prof, stack=stack, fabric=fab, rank_order=order
        )

    @property
    def loader_per_gpu(self) -> float:
        """Samples/s one GPU's share of the assumed host's data loader sustains (inf: no bound);
        :meth:`loader_rates` gives each plan's, on its own host and GPU."""
        rate, _ = replace(self, hosts=None).loader_rates(np.zeros(1, dtype=np.int64), np.ones(1))
        return float(rate[0])

    def loader_rates(self, device, gpus_per_node, hosts="own") -> tuple[np.ndarray, np.ndarray]:
        """(samples/s per GPU its loader sustains, GPU seconds per sample spent decoding on the
        SMs) of plans on device rows ``device`` in nodes of ``gpus_per_node`` (planner.loaders),
        on this model's hosts (or ``hosts``: None is the assumed host)."""
        from planner import loaders

        rate, decode = loaders.per_plan(
            self.loader, self.hosts if hosts == "own" else hosts, device, gpus_per_node
        )
        # The cited rates are for each net's published input size. Assumption: a loader's
        # per-image work (resize, crop, flip, normalise, copy to the GPU) grows with the output
        # pixels; JPEG decoding, which follows the stored image, does not, so this overstates the
        # change for a size far from the published one.
        return rate / self.image_scale, decode * self.image_scale

    @property
    def modern(self) -> bool:
        return get_rules(self.rules).modern

    def kwargs(self, devices: DeviceTable, links: LinkTable) -> dict:
        """Keyword arguments of :func:`costs.model.evaluate` for these tables."""
        if not self.modern:
            return {}
        from planner import fabrics

        eff = self.profile.apply(catalog.efficiency(devices.names, links.names))
        fab = fabrics.get(self.fabric).fabric
        return {
            "efficiency": eff,
            "options": Options(
                optimizer=self.optimizer,
                fabric=None if fab.flat else fab,
                rank_order=self.rank_order,
                fp32_grads=self.stack_info is not None and self.stack_info.gradients == "fp32",
            ),
        }

    def for_net(self, meta: dict, hosts=None, image_scale: float | None = None) -> CostModel:
        """This model for a net: the interval of its family (a transformer spec has a ``model``
        description) and its stack (``--stack``, or the family's default), whose profile it
        takes unless ``--calibration`` named one; ``image_scale`` overrides the net's pixels per
        image over its published size (a resizing schedule's mean)."""
        from planner.stacks import registry
        from planner.stacks.runs import profile as stack_profile

        family = registry.family_of(meta)
        vision = meta.get("vision") or {}
        if vision.get("native_image_size"):
            self = replace(self, image_scale=(vision["image_size"] / vision["native_image_size"]) ** 2)
        if image_scale is not None:
            self = replace(self, image_scale=image_scale)
        if not self.modern:
            return replace(self, family=family, hosts=hosts)
        names = registry.parse_choice(self.stack, family)
        profs = tuple(self.profile if self.calibration else stack_profile(registry.get(n)) for n in names)
        known = self.stack is not None or bool(self.calibration)
        return replace(
            self,
            family=family,
            stack=names[0],
            stacks=names,
            profile=profs[0],
            stack_profiles=profs,
            hosts=hosts,
            stack_known=known,
        )

    def for_stack(self, name: str) -> CostModel:
        """This model with one of its stacks (its profile and interval)."""
        i = self.stacks.index(name)
        return replace(self, stack=name, stacks=(name,), profile=self.stack_profiles[i], stack_profiles=())

    @property
    def interval_kind(self) -> str:
        """held-out (leave-one-source-out) or in-sample: the error the interval comes from."""
        return "in-sample" if self.profile.meta.get("error_kind") == "in-sample" else "held-out"

    @property
    def stack_info(self):
        """The :class:`~planner.stacks.registry.Stack` of this model (None under PALEO's rules)."""
        from planner.stacks import registry

        return registry.get(self.stack) if self.stack and self.stacks else None

    def fitted(self, generation: str) -> bool:
        """Whether the profile was fitted on runs of this GPU generation (it has a GEMM scale)."""
        return any(k.startswith(f"gemm.{generation}.") for k in self.profile.scales)

    @property
    def unseen_sd(self) -> float:
        """Spread (sd of the log error) of a prediction on a GPU generation the fit has not seen."""
        return UNSEEN_SD_LOG.get(self.family, UNSEEN_SD_LOG["all"])

    def interval_for(self, generation: str) -> tuple[float, float] | None:
        """The 80% interval of a plan on ``generation``: the profile's (:attr:`interval`), widened
        to the generation's own held-out interval where the profile states one (a fit with
        enough runs of it), or to the spread of predictions for generations a fit has not seen
        (:data:`UNSEEN_SD_LOG`) when it has no run of that generation."""
        interval = self.interval
        if interval is None:
            return None
        own = self.profile.meta.get(f"interval_{self.family}_{generation.replace(' ', '_')}")
        if own:
            return min(interval[0], float(own[0])), max(interval[1], float(own[1]))
        if self.fitted(generation):
            return interval
        wide = float(np.exp(Z80 * self.unseen_sd))
        return min(interval[0], 1.0 / wide), max(interval[1], wide)

    @property
    def stack_interval(self) -> tuple[float, float] | None:
        """(lo, hi) multipliers of predicted throughput that held 80% of held-out runs of the
        stack: those of the model's net family where the profile states it, else of every run."""
        meta = self.profile.meta
        lohi = meta.get(f"interval_{self.family}") or meta.get("interval")
        return (float(lohi[0]), float(lohi[1])) if lohi else None

    @property
    def interval(self) -> tuple[float, float] | None:
        """The 80% interval of a prediction: the stack's (:attr:`stack_interval`), widened to the
        spread between stacks (:data:`BETWEEN_STACKS`) when the request named no stack."""
        own = self.stack_interval
        spread = BETWEEN_STACKS.get(self.family)
        if own is None or self.stack_known or spread is None:
            return own
        return min(own[0], spread[0]), max(own[1], spread[1])

    @property
    def interval_basis(self) -> str:
        """What the interval is, in words: held-out or in-sample error of the stack, and the
        spread between stacks when the request named none."""
        of = f"profile {self.calibration}" if self.calibration else f"stack {self.stack}"
        base = f"{self.interval_kind} error of {of}"
        if self.stack_known or self.family not in BETWEEN_STACKS:
            return base
        return f"{base}, widened to the spread between stacks as no --stack was given"

    def plan_kwargs(self, plans) -> dict:
        """The evaluator arguments that depend on the plans: a node's data loader feeds the GPUs
        it holds (samples/s per node), decoding on the SMs adds GPU time per sample, and the
        host's NICs carry the traffic between nodes (planner.hosts); each per plan."""
        out = {}
        if not self.modern:
            return out
        if self.hosts is not None:
            nics = self.hosts.nics()[plans.device, self.hosts.column(plans.gpus_per_node)]
            if np.isfinite(nics).any():
                out["nics_per_node"] = np.where(np.isfinite(nics), nics, plans.gpus_per_node)
        if self.loader not in _LOADER_ENTRY:
            return out
        rate, decode = self.loader_rates(plans.device, plans.gpus_per_node)
        if np.isfinite(rate).any():
            out["loader_rate"] = rate * np.minimum(plans.gpus_per_node, plans.workers)
        if (decode > 0).any():
            out["decode_s"] = decode
        return out

    def host_record(self, g: int, gpus_per_node: int) -> dict:
        """The host and data loader of device row ``g`` in nodes of ``gpus_per_node`` GPUs, as
        record fields (planner.hosts, planner.loaders)."""
        from planner import loaders

        host = self.hosts.at(g, gpus_per_node) if self.hosts is not None else None
        rec = loaders.describe(self.loader, self.hosts, g, gpus_per_node)
        if "loader_samples_s_per_gpu" in rec and self.image_scale != 1.0:  # --image-size
            rec["loader_samples_s_per_gpu"] /= self.image_scale
            rec["loader"] += f", at {self.image_scale:.2f}x the published pixels per image"
        if host is None:
            return rec
        return {
            "instance": host.id,
            "host": host.describe(),
            "cpu_cores_per_gpu": host.cpu_cores_per_gpu,
            "nics_per_node": host.nics,
            **rec,
        }


def loader_for(net_meta: dict, choice: str) -> str:
    """``auto``: a CPU JPEG loader for nets trained on JPEG image sets read from storage
    (ImageNet), none for others (synthetic or in-memory data); else the choice as given."""
    if choice != "auto":
        return choice
    dataset = str(net_meta.get("training", {}).get("dataset", ""))
    return "cpu" if "imagenet" in dataset.lower() else "none"


def default_profile() -> profiles.Profile:
    """The shipped profile (configs/profiles/default.toml), fitted on the shipped measurements."""
    return profiles.from_dict(catalog.profile_data("default"), "configs/profiles/default.toml")
