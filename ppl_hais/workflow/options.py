"""The evidence call's options, each defined, checked and documented here once.

:class:`EvidenceOptions` is what every entry point of the evidence workflow takes: the NumPyro
``HAIS`` (``phn.HAIS(model, options)``), PyMC's ``php.sample_hais(..., options=options)``, the
calibration of Bayes factors and :func:`~ppl_hais.workflow.evidence.evidence` itself. Each also
takes the same fields as keywords, which replace the object's; either way the values are
checked when the object is made, before anything compiles. A new option is a field here (its
default, its check, its paragraph below) and the code that reads it.

Example
-------
>>> import ppl_hais as ph
>>> options = ph.EvidenceOptions(num_particles=256, flips="reduced")
>>> options.replace(num_steps=1000).num_steps
1000
>>> ph.EvidenceOptions(flips="reversed")
Traceback (most recent call last):
    ...
ValueError: unknown flips 'reversed': use one of ('reduced', 'standard')
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..annealing.config import AnnealOptions
from ..annealing.execution import GROUP_PARTICLES
from ..annealing.options import NUM_PARTICLES, check
from ..runtime.names import refuse_unknown

__all__ = ["EvidenceOptions"]


@dataclasses.dataclass(frozen=True)
class EvidenceOptions:
    """Every option of an evidence call, checked when made (``ValueError`` naming the first
    value that cannot work). Immutable and hashable: :meth:`replace` gives a changed copy.

    Attributes
    ----------
    num_particles : int
        Particles per chain, each an independent annealing run (default 512): past a few
        hundred, a gradient buys more accuracy as temperatures than as particles, and the
        convergence ladder spends it so.
    num_steps : int, optional
        The number of temperatures. ``None`` (default): the convergence ladder
        (:mod:`ppl_hais.checks.ladder`): 250 temperatures, then 4× as many with a fresh key
        while a trust check fails and ``max_gradients`` allows; every rung is in the result's
        trajectory and :func:`ppl_hais.results.plots.plot_convergence` draws them. A number:
        exactly one run of that many, whose weights' failed checks are cleared where its bias
        check agrees (:func:`ppl_hais.checks.ladder.clears`).
    num_chains : int
        Independent runs sharing one pilot (tuning is fixed before any chain starts, so each
        chain's Ẑ is unbiased and the chains are independent given it); default 1.
    target_se : float, optional
        Choose the number of temperatures for this standard error of the log evidence (a
        discarded 200-temperature probe measures how hard the path is; ``num_steps`` is then
        ignored): easy models cost little, hard ones up to ``max_num_steps`` and
        ``max_gradients``; missing the target is a failed check.
    max_num_steps : int
        The most temperatures ``target_se`` may choose (default 100,000).
    max_gradients : float, optional
        Every model gradient the call spends (pilots, Laplace fit, probes, the ladder's rungs,
        bias checks) counts against it. Default: 40 runs of 1000 temperatures for the ladder
        (room for 250, 1000, 4000 and 16,000 temperatures), unbounded with a fixed
        ``num_steps``; a budget too small for one run is an error.
    bias_check : "auto", True or False
        Anneal back from MCMC-refreshed posterior draws and report the gap to the estimate in
        nats (:mod:`ppl_hais.estimate.bias`): a gap beyond its noise is a failed check that
        states it. ``"auto"`` (default) checks runs that give a reason to (a target reaching
        past the start, a lag, a tail in the weights, a failed check), so easy models pay
        nothing. On the ladder it runs on the rung that would be the last. Not run for models
        with discrete coordinates or with a reverse run of their own (``bidirectional``).
    initial : "auto", "prior", "laplace", "laplace_t", "vi", "student_t" or a distribution
        Where annealing starts. ``"auto"`` (default) pilots the prior, keeps it when its
        pilot works, and otherwise pilots a Gaussian fitted at the posterior mode too and keeps
        the one whose weights degenerate less (:func:`ppl_hais.starts.choose_initial`; where the
        model's tails along the fit's axes are heavy, Student-t marginals with those tails,
        ``"laplace_t"``; on a hard path also natural-gradient VI fits); ``"prior"`` needs
        proper priors; ``"vi"``/``"student_t"`` a Gaussian/Student-t fitted by
        natural-gradient VI; or a :class:`~ppl_hais.Gaussian` over the model's unconstrained
        coordinates (NumPyro also takes ``(guide, params)`` of a fitted SVI guide). The
        estimate is of p(data | model) with the model's own prior whatever the start.
    schedule : "adaptive", a schedule's name or a 1-D array of β
        ``"adaptive"`` (default) places the temperatures at equal thermodynamic length,
        measured on a discarded pilot run (the estimate stays unbiased);
        :func:`ppl_hais.make_schedule`'s names; or the temperatures themselves.
    step_size : "auto" or float
        ``"auto"`` (default): a function of β tuned by the pilot to a target acceptance.
    target_accept : float, optional
        The pilot's target acceptance (default: chosen for the transition).
    adapt_mass_matrix : bool
        The pilot also fits a diagonal mass matrix per temperature (default True).
    num_pilot_particles, num_pilot_steps : int
        The pilot's population and temperatures (defaults 64 and 1000).
    refresh : float
        The fraction of momentum power replaced per unit simulation time, in (0, 1] (default ½,
        [HAIS12]'s); 1 resamples the momentum every step.
    num_leapfrog : int
        Leapfrog steps per temperature (default 1).
    lookahead : int
        Trajectories tried before a rejection (LAHMC; default 1, none).
    flips : "standard" or "reduced"
        Momentum flips after a rejection; ``"reduced"`` negates it only as often as invariance
        needs ([SD12] ch. 6).
    step_size_jitter : float
        Each transition's step size drawn from ε·[1 − j, 1 + j], as Stan's
        ``stepsize_jitter`` (default 0).
    local_steps : bool, optional
        A step size per particle scaled by the local gradient (short steps where the density
        is steep, exact by a Metropolis correction). ``None`` (default) lets the ladder switch
        it on after a rung whose bias and lag checks failed (a funnel's neck); True or False,
        always or never. Needs ``lookahead=1`` and ``flips="standard"``.
    bidirectional : bool
        Also anneal back from a quarter of the final particles and report the gap (a bias
        diagnostic of its own; the bias check is then not run).
    num_bins : int
        Bins of temperatures the trace records (default 100).
    devices : sequence of jax.Device, optional
        Shard the particles over these devices (default: this process's CPU threads or its
        one accelerator; :mod:`ppl_hais.annealing.execution`).
    """

    num_particles: int = NUM_PARTICLES
    num_steps: int | None = None
    num_chains: int = 1
    target_se: float | None = None
    max_num_steps: int = 100_000
    max_gradients: float | None = None
    bias_check: bool | str = "auto"
    initial: Any = "auto"
    schedule: Any = "adaptive"
    step_size: Any = "auto"
    target_accept: float | None = None
    adapt_mass_matrix: bool = True
    num_pilot_particles: int = GROUP_PARTICLES
    num_pilot_steps: int = 1000
    refresh: float = 0.5
    num_leapfrog: int = 1
    lookahead: int = 1
    flips: str = "standard"
    step_size_jitter: float = 0.0
    local_steps: bool | None = None
    bidirectional: bool = False
    num_bins: int = 100
    devices: Any = None

    def __post_init__(self):
        check(**{k: v for k, v in self.fields().items() if k not in UNCHECKED})

    @classmethod
    def of(cls, options: EvidenceOptions | Mapping | None = None, where: str = "evidence",
           **keywords) -> EvidenceOptions:  # fmt: skip
        """``options`` (an :class:`EvidenceOptions`, a mapping of its fields, or None for the
        defaults) with ``keywords`` replacing its fields; a name that is no field is refused
        as Python refuses an unknown keyword of ``where()``, with the closest field's name."""
        if options is None:
            options = cls()
        elif isinstance(options, Mapping):
            options = cls.of(None, where, **options)
        elif not isinstance(options, cls):
            raise TypeError(f"{where}() takes options as a ppl_hais.EvidenceOptions or a dict "
                            f"of its fields, got {type(options).__name__}")  # fmt: skip
        names = cls.names()
        refuse_unknown({k: v for k, v in keywords.items() if k not in names}, where, names)
        return options.replace(**keywords) if keywords else options

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The fields' names: the keywords the entry points take besides their own."""
        return tuple(f.name for f in dataclasses.fields(cls))

    def replace(self, **changes) -> EvidenceOptions:
        """A copy with ``changes``, checked as a new object is."""
        return dataclasses.replace(self, **changes)

    def fields(self) -> dict:
        """The fields by name (values as given, not copied)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @property
    def ladder(self) -> bool:
        """Whether the convergence ladder chooses the temperatures (neither ``num_steps`` nor
        ``target_se`` given)."""
        return self.num_steps is None and self.target_se is None

    def anneal(self) -> AnnealOptions:
        """The anneal's part of these options, for every pilot, rung and bias check of the
        call (``local_steps=None`` anneals without them until the ladder switches)."""
        return AnnealOptions.of({**self.fields(), "local_steps": bool(self.local_steps)})



# fields with no value to refuse: any bool works, and devices are JAX's to check
UNCHECKED = ("adapt_mass_matrix", "bidirectional", "devices")
