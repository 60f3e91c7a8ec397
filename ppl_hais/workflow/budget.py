"""How many temperatures a requested standard error needs, from discarded probe runs.

A probe anneals the main run's number of particles over a few temperatures with the pilot's
tuning and measures its SE; for a well-annealed path Var(log Ẑ) ≈ c / (P·N), so the main run
gets N = N_probe·(SE_probe / 0.9·target)² / C temperatures for C chains. The main run's N
depends only on discarded probes, so its Ẑ stays unbiased; whether it met the target is
checked afterwards (the evidence workflow's ``target_se`` check).

The convergence ladder's gradient accounting is here too: what a run spent
(:func:`main_gradients`), what a bias check after the next rung is predicted to cost
(:func:`bias_reserve`), and whether that rung and its check fit ``max_gradients``
(:func:`next_fits`), and the call's budget itself (:func:`gradient_cap`), refused before anything
compiles when it is too small for one run (:func:`check_room`).

A probe whose SE is not finite (k̂ ≥ 0.7: its weights' variance is not estimable) says
nothing about N. It gets a longer probe (4× the temperatures, while the budget allows), not
the largest N allowed: an infinite SE from 200 temperatures had made a two-mode mixture, which
200 temperatures get right, run 100,000 (51 M gradients).

Example
-------
>>> import jax, jax.numpy as jnp, ppl_hais as ph
>>> from ppl_hais.workflow.budget import choose_num_steps
>>> target = ph.AnnealingTarget(lambda z: -0.5 * jnp.sum((z / 2.0) ** 2),
...                             ph.Gaussian(jnp.zeros(2)))
>>> plan = choose_num_steps(jax.random.key(0), target, None, 0.05, num_particles=128,
...                         max_gradients=128 * 5_000)
>>> 200 <= plan.num_steps <= 5_000
True
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

from ..annealing import PilotOptions
from ..annealing.kernels import TransitionKernel, hais_kernel
from ..checks import diagnostics, ladder
from ..checks.ladder import next_num_steps
from ..estimate.annealers import AnnealOptions, anneal
from ..estimate.bias import mcmc_length

__all__ = ["Spent", "StepsPlan", "bias_reserve", "check_room", "choose_num_steps", "gradient_cap",
           "main_gradients", "next_fits"]

PROBE_STEPS = 200
PROBE_GROWTH = 4  # an infinite-SE probe is rerun with this many times the temperatures
SE_AIM = 0.9  # plan for 0.9 × target_se: the probe's SE is itself an estimate
SE_SLACK = 1.2  # a failed check when the SE exceeds 1.2 × target_se


class StepsPlan(NamedTuple):
    """What :func:`choose_num_steps` chose and what its probes measured."""

    num_steps: int  # the main run's temperatures
    predicted_se: float  # the SE the last probe predicts for the main run (inf: none measured)
    probe_se: float  # the last probe's SE
    probe_steps: int  # the last probe's temperatures
    probe_gradients: int  # model gradients the probes spent


def choose_num_steps(
    rng_key,
    target,
    pilot,
    target_se,
    *,
    num_particles,
    num_chains=1,
    max_num_steps=100_000,
    max_gradients=None,
    kernel: TransitionKernel | None = None,
    options: PilotOptions | None = None,
) -> StepsPlan:
    """The number of temperatures for ``target_se``, between 200 and ``max_num_steps``.

    ``max_gradients`` bounds the main run's model gradients (particles × chains × N × the
    kernel's gradients per temperature) and the probes' together; the plan reports what the
    probes spent (``probe_gradients``), the SE each probe measured (``probe_se``, the last
    one's) and the SE predicted for the main run.
    The probes run ``kernel`` (default :func:`~ppl_hais.hais_kernel`) with ``pilot``'s tuning,
    and ``options`` (:class:`~ppl_hais.annealing.PilotOptions`: the schedule, a fixed step
    size, and the tuning of a pilot of their own when ``pilot`` is None).
    """
    if not target_se > 0:
        raise ValueError(f"target_se must be positive, got {target_se!r}")
    kernel = hais_kernel() if kernel is None else kernel
    # a temperature's model gradients per particle (a density evaluation for a random walk)
    gps = max(float(kernel.gradients_per_step), 1.0)
    per_step = int(num_particles) * int(num_chains) * gps
    cap = int(max_num_steps)
    if max_gradients is not None:
        check_room(max_gradients, num_chains=num_chains, num_particles=num_particles,
                   num_leapfrog=gps, num_steps=PROBE_STEPS)  # fmt: skip
        cap = min(cap, int(max_gradients // per_step))
    options = PilotOptions() if options is None else options
    probe_steps, spent, se = PROBE_STEPS, 0, float("inf")
    while True:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", diagnostics.EvidenceWarning)
            probe = anneal(
                rng_key, target, kernel, AnnealOptions(pilot=options),
                num_particles=num_particles, num_steps=probe_steps, pilot=pilot,
                progress_bar=False,
            )  # fmt: skip
        spent += int(int(num_particles) * probe_steps * gps)
        se = probe.log_z_se
        longer = probe_steps * PROBE_GROWTH
        if (np.isfinite(se) and se > 0) or longer > cap - int(spent // per_step):
            break
        probe_steps = longer
    if np.isfinite(se) and se > 0:
        wanted = probe_steps * (se / (SE_AIM * target_se)) ** 2 / num_chains
    else:  # no probe could measure the SE: the longest probe's length, not the maximum
        wanted = probe_steps
    room = max(cap - int(spent // per_step), PROBE_STEPS)
    steps = int(np.clip(np.ceil(wanted), PROBE_STEPS, room))
    predicted = se * np.sqrt(probe_steps / steps / num_chains) if np.isfinite(se) else np.inf
    return StepsPlan(steps, float(predicted), float(se), probe_steps, spent)


# -- the convergence ladder's gradient accounting (ppl_hais.workflow.evidence)
def main_gradients(results) -> int:
    """Model gradients of a run's chains (their particles × gradients per particle)."""
    return int(sum(r.settings.gradients_per_particle * r.num_particles for r in results))


def bias_reserve(num_steps, gradients_per_step, last_check, num_draws=256):
    """What a bias check after a run of ``num_steps`` temperatures is predicted to cost: its
    reverse anneal (``num_draws`` chains over the schedule) and its MCMC (the last check's,
    scaled by the transitions each runs, :func:`~ppl_hais.estimate.bias.mcmc_length`, and by
    its draws: a check in doubt by its noise alone drew more, ``bias.EXTEND``; before any has
    run, 128 chains × 2 × those transitions × 8 leapfrog steps)."""
    reverse = num_draws * num_steps * gradients_per_step
    if last_check is None:
        return int(reverse + 128 * 2 * mcmc_length(num_steps) * 8 * gradients_per_step)
    mcmc = last_check.gradients - last_check.num_draws * last_check.num_steps * gradients_per_step
    scale = (mcmc_length(num_steps) / mcmc_length(last_check.num_steps)
             * num_draws / last_check.num_draws)  # fmt: skip
    return int(reverse + max(mcmc, 0) * scale)


def next_fits(spent, last_check, *, ladder, max_gradients, checking, steps, per_step, gps):
    """Whether the ladder's next rung, and a bias check after it, fit the gradient budget."""
    if not ladder:
        return False
    nxt = next_num_steps(steps)
    reserve = bias_reserve(nxt, gps, last_check) if checking else 0
    return spent + per_step * nxt + reserve <= max_gradients


class Spent(NamedTuple):
    """What the last bias check cost: its gradients, reverse-anneal draws and temperatures."""

    gradients: int
    num_draws: int
    num_steps: int


def check_room(max_gradients, *, num_chains, num_particles, num_leapfrog, num_steps) -> None:
    """Refuse a gradient budget too small for one run (``num_leapfrog``: model gradients per
    particle and temperature)."""
    need = num_particles * num_chains * num_leapfrog * num_steps
    if max_gradients is not None and not max_gradients >= need:
        raise ValueError(
            f"max_gradients={max_gradients:g} is too small for one run: {num_chains} chain(s) × "
            f"{num_particles} particles × {num_steps} temperatures need {int(need):,} gradients"
        )


def gradient_cap(max_gradients, ladder_on, target_se, num_chains, num_particles, num_leapfrog,
                 num_steps):  # fmt: skip
    """The call's gradient budget: the ladder's default where none is given
    (:func:`ppl_hais.checks.ladder.default_max_gradients`), refused when too small for one run of
    ``num_steps`` temperatures (unless ``target_se`` chooses the temperatures)."""
    if max_gradients is None and ladder_on:
        max_gradients = ladder.default_max_gradients(num_particles, num_chains, num_leapfrog)
    if target_se is None:
        check_room(max_gradients, num_chains=num_chains, num_particles=num_particles,
                   num_leapfrog=num_leapfrog, num_steps=num_steps)  # fmt: skip
    return max_gradients
