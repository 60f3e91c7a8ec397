"""The public annealers :func:`ais`, :func:`hais` and :func:`bdmc`: validation, the pilot, the
main run (:mod:`.execution`) and the result.

Step size
---------
``step_size`` is a number (fixed; [HAIS12] uses 0.2) or ``"auto"``. ``"auto"`` (and
``schedule="adaptive"``) runs a short *pilot* anneal first (``num_pilot_particles`` particles
over at most ``num_pilot_steps`` temperatures of the same schedule) whose step size follows the
population's mean acceptance toward ``target_accept`` by a Robbins–Monro rule; the pilot's
particles are discarded and its step size, as a function of β, is frozen before the main run
starts. With ``adapt_mass_matrix`` (the default) the pilot also measures each coordinate's
scale in its population, and the main run moves coordinate i by step size × scale_i(β): a
diagonal mass matrix that follows the annealing from prior to posterior (the step size is then
in units of that scale, so the paper's momentum refresh per unit time keeps its meaning at every
β). The main run's kernels are thus fixed in advance and independent of its own particles,
so Ẑ stays exactly unbiased (an adaptation that used the main run's own particles would only
be consistent as P → ∞).
"""

from __future__ import annotations

import time

import jax.numpy as jnp
import numpy as np

from ..annealing.config import AnnealOptions, RunOptions
from ..annealing.execution import GROUP_PARTICLES, initial_sampler, resolve_devices, run
from ..annealing.kernels import HAISOptions, TransitionKernel, mixed_kernel
from ..annealing.options import check as check_options
from ..annealing.outputs import chain_results
from ..annealing.pilot import Pilot, PilotOptions, survey
from ..checks import diagnostics
from ..mcmc import fast_random
from ..model.schedules import adaptive_schedule, make_schedule
from ..model.target import AnnealingTarget
from ..results.result import AISResult
from ..results.settings import RunSettings
from ..runtime.names import suggest_keywords
from ..runtime.precision import float64
from ..stats.estimators import systematic
from .bias import BIAS_STREAM, check_bias, needs_check, with_bias

__all__ = ["anneal", "ais", "bdmc", "hais"]


@float64
@suggest_keywords
def ais(
    rng_key,
    target: AnnealingTarget,
    kernel: TransitionKernel,
    *,
    num_particles: int = 256,
    num_steps: int = 1000,
    schedule="adaptive",
    step_size="auto",
    target_accept: float | None = None,
    num_pilot_particles: int = GROUP_PARTICLES,
    num_pilot_steps: int = 1000,
    adapt_mass_matrix: bool = True,
    bidirectional: bool = False,
    reverse_from=None,
    pilot: Pilot | None = None,
    num_bins: int = 100,
    progress_bar: bool = True,
    devices=None,
    num_chains: int = 1,
    bias_check=False,
) -> AISResult | list[AISResult]:
    """Annealed importance sampling with any transition kernel.

    Parameters
    ----------
    rng_key : jax.random key
        Same key ⇒ bit-identical result.
    target : AnnealingTarget
    kernel : TransitionKernel
        ``ph.hais_kernel()``, ``ph.resampled_hmc_kernel()`` or ``ph.random_walk_kernel()``.
    num_particles : int
        Number of independent annealing chains P.
    num_steps : int
        Number of intermediate distributions N (ignored when ``schedule`` is an array).
    schedule : {"adaptive", "linear", "sigmoid", "geometric", "survey"} or array
        The betas 0 = β_0 ≤ … ≤ β_N = 1. ``"adaptive"`` (default) places them at equal
        thermodynamic length (:func:`~ppl_hais.model.schedules.adaptive_schedule`) from the
        spread of the log likelihood ratio measured by the pilot run, which surveys the path on
        :func:`~ppl_hais.model.schedules.survey_schedule` (down to β = 10⁻⁸, so a posterior 10⁴
        times narrower than the initial distribution per coordinate is still resolved); like
        the step size, it is fixed before the main run starts, so Ẑ stays unbiased.
    step_size : float or "auto"
        Fixed step size (leapfrog ε or random-walk σ), or ``"auto"``: tuned on a discarded
        pilot run toward ``target_accept`` and frozen (keeps Ẑ unbiased; see module docs).
    adapt_mass_matrix : bool
        With ``step_size="auto"``, also precondition each coordinate by the scale of the
        pilot's population at that β (a diagonal mass matrix that follows the annealing; the
        step size is then in units of that scale). NumPyro's spelling.
    target_accept : float, optional
        Mean Metropolis acceptance the pilot aims for (0.9 for leapfrog kernels, 0.3 for
        random walk).
    bidirectional : bool
        Also anneal back from the target to the initial distribution, starting from
        ``num_particles // 4`` of the final particles resampled by weight, with the same
        schedule and kernels; the result's ``log_z_upper`` is that reverse estimate and
        ``bidirectional_gap`` its distance to ``log_z``. The reverse estimate is an upper
        bound only when it starts from *exact* posterior draws (:func:`ppl_hais.bdmc`); from
        the run's own particles it is a diagnostic, and a large gap warns.
    reverse_from : (R, D) array, optional
        Start the reverse run from these positions instead (exact draws of the target: BDMC).
    pilot : Pilot, optional
        A pilot measured before (:func:`pilot_run`), reused instead of running a new one.
    num_bins : int
        Per-temperature diagnostics are averaged into this many bins.
    progress_bar : bool
        Show a progress bar (NumPyro's spelling).
    devices : list of jax.Device, optional
        Where the main run's particles go: sharded over these devices (default: every local
        device of the default backend; on CPU one device, with particle groups on threads,
        which measured faster than host devices). The same key gives the
        same estimate on 1 or k devices; ``settings.num_devices`` records k and
        ``settings.particles_per_device`` the rows each device held.

    num_chains : int
        Independent estimates from one call: the main run anneals ``num_chains ×
        num_particles`` particles (one pilot, one compiled scan, one dispatch: 2.1–2.5×
        faster than separate calls on 2 CPU cores, docs/chains.md) and chain c is particles
        c·P … (c+1)·P − 1, whose random numbers no other chain shares. Each chain's ``trace``
        is the whole population's.

    bias_check : bool or "auto"
        Anneal back from the final particles moved by MCMC at β = 1
        (:mod:`ppl_hais.estimate.bias`): ``log_z_upper`` is that reverse estimate and a gap
        beyond its noise is a failed check (``bias``) stating it in nats. ``"auto"`` checks
        runs that give a reason to (their particles end outside the start, a lag, a tail in
        the weights, a failed check).
        Default ``False`` here; the evidence workflow and both adapters default to ``"auto"``.

    Returns
    -------
    AISResult, or a list of ``num_chains`` of them when ``num_chains > 1``
        With its trust checks: every failed one is also raised as
        :class:`~ppl_hais.EvidenceWarning`.

    On one CPU device the main run's particles are split into groups, two per core,
    dispatched from threads (particle i draws the same random numbers either way).
    """
    # a bad value fails here, named, before anything compiles (the evidence workflow's checks)
    check_options(num_particles=num_particles, num_chains=num_chains, step_size=step_size,
                  target_accept=target_accept, schedule=schedule,
                  num_pilot_particles=num_pilot_particles, num_pilot_steps=num_pilot_steps,
                  num_bins=num_bins)  # fmt: skip
    pilot_options = PilotOptions(schedule, step_size, target_accept, num_pilot_particles,
                                 num_pilot_steps, adapt_mass_matrix)  # fmt: skip
    options = AnnealOptions(pilot=pilot_options, run=RunOptions(bidirectional, reverse_from,
                                                                num_bins, devices))  # fmt: skip
    return anneal(rng_key, target, kernel, options, num_particles=num_particles,
                  num_steps=num_steps, num_chains=num_chains, pilot=pilot,
                  progress_bar=progress_bar, bias_check=bias_check)  # fmt: skip


@float64
def anneal(rng_key, target: AnnealingTarget, kernel: TransitionKernel, options: AnnealOptions,
           *, num_particles: int = 256, num_steps: int = 1000, num_chains: int = 1,
           pilot: Pilot | None = None, progress_bar: bool = True,
           bias_check=False) -> AISResult | list[AISResult]:  # fmt: skip
    """:func:`ais` with its options as one :class:`AnnealOptions` (``options.kernel`` is not
    read: ``kernel`` is the transition), checked by the caller: the evidence workflow's
    pilots, probes and rungs run through here."""
    schedule, step_size, target_accept, num_pilot_particles, num_pilot_steps, \
        adapt_mass_matrix = options.pilot
    bidirectional, reverse_from, num_bins, devices = options.run
    adaptive = isinstance(schedule, str) and schedule == "adaptive"
    base = "survey" if adaptive else schedule
    betas = make_schedule(base, None if not isinstance(base, str) else num_steps)
    num_steps = int(num_steps) if adaptive else len(betas) - 1
    num_particles, num_chains = int(num_particles), int(num_chains)
    if num_chains > 1 and (bidirectional or reverse_from is not None):
        raise ValueError("a bidirectional run (bidirectional=, reverse_from=) has one chain")
    if bias_check not in (True, False, "auto"):
        raise ValueError(f"bias_check must be True, False or 'auto', got {bias_check!r}")
    num_bins = int(num_bins)  # bins without temperatures (N < num_bins) are dropped
    rng_key = fast_random.check_key(rng_key)
    _check_initial(target, rng_key)
    start = time.perf_counter()
    key_pilot, key_main, key_sample, key_reverse = fast_random.host_split(rng_key, 4)
    auto, step_size, target_accept = _step_size(step_size, target_accept, kernel)
    num_pilot = int(num_pilot_particles) if (auto or adaptive) and pilot is None else 0
    # one draw (one compiled sampler) for the pilot's and the main run's initial particles
    positions = initial_sampler(target, num_pilot + num_chains * num_particles)(key_sample)
    if num_pilot:
        pilot_options = PilotOptions(schedule, step_size, target_accept, num_pilot, num_pilot_steps,
                                     adapt_mass_matrix)  # fmt: skip
        pilot = survey(key_pilot, target, kernel, num_steps=num_steps, options=pilot_options,
                       positions=positions[:num_pilot], progress_bar=progress_bar)  # fmt: skip
    pilot_gradients = 0
    if pilot is not None:
        pilot_gradients = pilot.gradients_per_particle(kernel.gradients_per_step)
        if adaptive:
            betas = adaptive_schedule(pilot.betas, pilot.log_ratio_sd, num_steps)
    if auto:
        ref_betas, ref_log_step, scale_ref = pilot.betas, pilot.log_step, pilot.scale
    else:
        ref_betas, ref_log_step = np.array([0.0, 1.0]), np.full(2, np.log(step_size))
        scale_ref = None
    devices = resolve_devices(devices)
    tuning = dict(num_bins=num_bins, progress_bar=progress_bar, scale_ref=scale_ref)
    out = run(
        key_main, target, kernel, betas, ref_betas, ref_log_step, positions[num_pilot:],
        desc=kernel.name, devices=devices, **tuning,
    )  # fmt: skip
    reverse = None
    if bidirectional or reverse_from is not None:
        reverse = _reverse_run(key_reverse, target, kernel, betas, (ref_betas, ref_log_step),
                               out, reverse_from, tuning)  # fmt: skip
    wall = time.perf_counter() - start
    settings = RunSettings(
        kernel=kernel.name,
        num_particles=num_particles,
        num_steps=len(betas) - 1,
        schedule=schedule if isinstance(schedule, str) else "user",
        step_size=step_size,
        target_accept=target_accept,
        gradients_per_particle=float(out.gradients[0]),
        gradients_executed_per_particle=float(out.gradients[1]),
        pilot_gradients_per_particle=pilot_gradients,
        num_pilot_particles=num_pilot,
        num_devices=len(devices),
        # rows of the main run's particles on each device of this process, as XLA placed them
        particles_per_device=tuple(out.particles_per_device),
        discrete_acceptance=(float(out.gradients[2]) / max(len(betas) - 1, 1) if kernel.discrete
                             else None),
        num_reverse_particles=None if reverse is None else int(reverse.log_weights.shape[0]),
        reverse_from=(None if reverse is None else "exact draws" if bidirectional is False
                      else "own particles"),
        num_chains=num_chains,
    )  # fmt: skip
    results = chain_results(out, reverse, target, betas, settings, num_chains, wall)
    if bias_check and reverse is None and not kernel.discrete:
        if bias_check is True or needs_check(results):
            key = fast_random.host_fold_in(rng_key, BIAS_STREAM)
            check = check_bias(key, target, results, pilot, kernel=kernel, step_size=step_size)
            results = [with_bias(r, check) for r in results]
    for c, result in enumerate(results):
        diagnostics.warn(result.checks, "log Z" if num_chains == 1 else f"log Z of chain {c}")
    return results[0] if num_chains == 1 else results


@float64
def bdmc(rng_key, target: AnnealingTarget, exact_draws, **kwargs) -> AISResult:
    """Bidirectional Monte Carlo (Grosse et al. 2015): log Z sandwiched between two anneals.

    A forward HAIS run from the initial distribution gives a stochastic lower bound
    (``result.log_z``: E[log Ẑ] ≤ log Z) and a reverse run from ``exact_draws``, exact
    samples of the target, gives a stochastic upper bound (``result.log_z_upper``). Their gap
    bounds the bias of either. Exact draws exist for simulated data: the parameters that
    generated the data are an exact posterior draw. The draws are reused cyclically to start
    at least ``num_particles // 4`` reverse chains (each is unbiased for 1/Z from an exact
    draw). Keyword arguments go to :func:`hais`.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, numpy as np, ppl_hais as ph
    >>> target = ph.AnnealingTarget(
    ...     log_density=lambda z: -0.5 * jnp.sum(((z - 2.0) / 0.5) ** 2),
    ...     initial=ph.Gaussian(jnp.zeros(3)))
    >>> exact = 2.0 + 0.5 * np.random.default_rng(0).normal(size=(64, 3))
    >>> res = ph.bdmc(jax.random.key(0), target, exact, num_particles=128, num_steps=300,
    ...               progress_bar=False)
    >>> bool(res.log_z - 0.1 < 3 * np.log(0.5 * np.sqrt(2 * np.pi)) < res.log_z_upper + 0.1)
    True
    """
    draws = np.atleast_2d(np.asarray(exact_draws, dtype=float))
    # each reverse chain from an exact draw is unbiased for 1/Z: reuse the draws cyclically
    # up to a quarter of the forward particles, so one simulated data set gives a usable bound
    num = max(len(draws), int(kwargs.get("num_particles", 256)) // 4)
    return hais(rng_key, target, reverse_from=np.resize(draws, (num, draws.shape[1])), **kwargs)


@float64
def hais(
    rng_key,
    target: AnnealingTarget,
    *,
    num_particles: int = 256,
    num_steps: int = 1000,
    step_size="auto",
    refresh: float = 0.5,
    num_leapfrog: int = 1,
    flips: str = "standard",
    lookahead: int = 1,
    step_size_jitter: float = 0.0,
    local_steps: bool = False,
    schedule="adaptive",
    discrete=None,
    **kwargs,
) -> AISResult:
    """Hamiltonian annealed importance sampling ([HAIS12] §2.3): the log normalizer of a target.

    Runs :func:`ais` with :func:`~ppl_hais.annealing.kernels.hais_kernel`: one leapfrog step per
    temperature, momentum persistent across temperatures, negated on rejection and partially
    refreshed (``refresh`` = fraction of momentum power replaced per unit simulation time).
    ``flips="reduced"`` negates the momentum on rejection only as often as invariance needs
    ([SD12] ch. 6) and ``lookahead=K`` tries K trajectories first (LAHMC); both spend extra
    gradients after rejections only (counted in ``settings``). ``step_size_jitter=j`` draws
    each transition's step size from ε·[1 − j, 1 + j], as Stan's ``stepsize_jitter``;
    ``local_steps=True`` scales it per particle by the local gradient (short steps where the
    density is steep, exact by a Metropolis correction; :func:`~ppl_hais.hais_kernel`).
    ``discrete``: booleans, one per coordinate, True where the coordinate is an integer: those
    are moved by a Metropolis step after each HMC step instead
    (:func:`~ppl_hais.annealing.kernels.mixed_kernel`); the initial distribution must draw
    integers there. Other keyword arguments go to :func:`ais`.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, numpy as np, ppl_hais as ph
    >>> target = ph.AnnealingTarget(
    ...     log_density=lambda z: -0.5 * jnp.sum((z / 3.0) ** 2),   # log Z = 2·log(3·√(2π))
    ...     initial=ph.Gaussian(jnp.zeros(2)))
    >>> res = ph.hais(jax.random.key(0), target, num_particles=128, num_steps=500,
    ...               progress_bar=False)
    >>> bool(abs(res.log_z - 2 * np.log(3 * np.sqrt(2 * np.pi))) < 5 * res.log_z_se + 0.05)
    True
    """
    check_options(refresh=refresh, num_leapfrog=num_leapfrog, lookahead=lookahead, flips=flips,
                  step_size_jitter=step_size_jitter, local_steps=local_steps)  # fmt: skip
    kernel = HAISOptions(refresh, num_leapfrog, lookahead, flips, step_size_jitter,
                         local_steps).kernel()
    if discrete is not None and np.any(discrete):
        kernel = mixed_kernel(tuple(bool(d) for d in np.ravel(discrete)), kernel)
    return ais(
        rng_key,
        target,
        kernel,
        num_particles=num_particles,
        num_steps=num_steps,
        schedule=schedule,
        step_size=step_size,
        **kwargs,
    )


def _step_size(step_size, target_accept, kernel):
    """(tuned by the pilot, the step size, the pilot's acceptance target), checked."""
    auto = isinstance(step_size, str)
    if auto and step_size != "auto":
        raise ValueError("step_size must be a positive number or 'auto'")
    if not auto:
        step_size = float(step_size)
        if not step_size > 0:
            raise ValueError("step_size must be positive")
    if auto and target_accept is None:
        target_accept = 0.9 if kernel.gradients_per_step > 0 else 0.3
    return auto, step_size, target_accept


def _reverse_run(rng_key, target, kernel, betas, reference, out, reverse_from, tuning):
    """The anneal back from ``reverse_from`` (default: a quarter of the main run's particles,
    resampled by weight) over the same schedule and tuning."""
    if reverse_from is None:
        num = max(len(out.log_weights) // 4, 2)
        idx = systematic(np.asarray(out.log_weights), num, 0.5)
        reverse_from = np.asarray(out.particles)[idx]
    start = jnp.asarray(np.atleast_2d(np.asarray(reverse_from, dtype=float)))
    dim = np.shape(out.particles)[-1]
    if start.shape[-1] != dim:
        raise ValueError(
            f"reverse_from has {start.shape[-1]} coordinates; the target has {dim}"
        )
    return run(rng_key, target, kernel, betas[::-1].copy(), *reference, start, desc="reverse",
               **tuning)  # fmt: skip


def _check_initial(target, rng_key):
    """Fail early on an initial distribution that cannot be sampled inside the box."""
    box = target.box
    if box is None:
        return
    z = np.asarray(target.initial.sample(fast_random.host_fold_in(rng_key, 17), (64,)))
    if np.any(z < box[0]) or np.any(z > box[1]):
        raise ValueError(
            "the initial distribution puts samples outside the target's bounds; use an initial "
            "distribution supported inside the box (e.g. a truncated or transformed one)"
        )
