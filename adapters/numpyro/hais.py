"""``HAIS``: the evidence of a NumPyro model, shaped like ``numpyro.infer.MCMC``.

Example
-------
>>> import jax, jax.numpy as jnp, numpyro, numpyro.distributions as dist
>>> from ppl_hais.adapters import numpyro as phn
>>> def model(y=None):
...     mu = numpyro.sample("mu", dist.Normal(0.0, 2.0))
...     numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)
>>> hais = phn.HAIS(model, num_particles=128, num_steps=300, progress_bar=False)
>>> hais.run(jax.random.key(0), y=jnp.array([0.3, -0.5, 1.1]))
>>> hais.get_samples()["mu"].shape
(128,)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
from numpyro import handlers
from numpyro.infer.util import log_likelihood as _pointwise_log_likelihood
from scipy.special import logsumexp

from ppl_hais.mcmc.fast_random import check_key, host_fold_in, host_key, host_split
from ppl_hais.results.arviz import from_ais
from ppl_hais.runtime.precision import float64
from ppl_hais.workflow.evidence import evidence
from ppl_hais.workflow.memory import Memory
from ppl_hais.workflow.options import EvidenceOptions

from .target import NumPyroTarget, constrain_batch, guide_initial, refuse_foreign_model


class HAIS:
    """Log marginal likelihood of a NumPyro model by HAIS, shaped like ``numpyro.infer.MCMC``.

    Parameters
    ----------
    model : callable
        A NumPyro model with continuous latent sites.
    options : ppl_hais.EvidenceOptions or dict, optional
        The evidence's options, each documented there: ``num_particles`` (512),
        ``num_steps`` (None: the convergence ladder), ``num_chains`` (independent runs, shown as
        ArviZ chains), ``initial`` (where annealing starts; also a NumPyro guide as
        ``(guide, params)``), ``target_se``, ``max_gradients``, ``bias_check``, the pilot's
        ``schedule``, ``step_size`` and ``adapt_mass_matrix``, and the transition's
        ``num_leapfrog``, ``flips``, ``lookahead``, ``refresh`` and ``local_steps``.
    **keywords
        Those fields by name, replacing the object's:
        ``HAIS(model, num_particles=256, flips="reduced")``.
    remember : bool
        Keep each run's start, its tuning and where its ladder stopped in this object's
        ``memory`` (a :class:`ppl_hais.workflow.memory.Memory`), so a later ``run`` on the same
        model and data runs no pilot and begins at that rung. Runs that remember share one
        pilot's luck; by default (False) every run tunes from its own key, and runs with
        different keys are independent. ``hais.memory.clear()`` forgets.
    progress_bar : bool
        A tqdm bar per phase (pilot, each rung, the bias check).

    Notes
    -----
    The estimate comes with its trust checks (Pareto k̂, importance ESS, chains' agreement):
    a failed check raises :class:`ppl_hais.EvidenceWarning` and shows in ``print_summary``.

    Examples
    --------
    See the module docstring.
    """

    def __init__(self, model, options=None, *, remember=False, progress_bar=True, **keywords):
        refuse_foreign_model(model)
        self.model = model
        self.options = EvidenceOptions.of(options, "HAIS", **keywords)
        self.progress_bar = progress_bar
        self.memory = Memory() if remember else None
        self.evidence = self._samples = None

    @property
    def num_particles(self) -> int:
        return int(self.options.num_particles)

    @property
    def num_chains(self) -> int:
        return int(self.options.num_chains)

    # az.from_numpyro reads num_samples (ArviZ 0.x) or sample_dims (1.x): the error says why not
    @property
    def sample_dims(self):
        raise AttributeError(
            "az.from_numpyro does not take a phn.HAIS (ArviZ reads it as an MCMC, or on ArviZ "
            ">= 1 as an inference adapter whose get_samples() groups draws by chain): use "
            "hais.to_arviz(), which gives the posterior, sample_stats with the evidence, "
            "log_likelihood and observed_data"
        )

    num_samples = sample_dims

    # -- running
    def run(self, rng_key, *args, extra_fields=(), init_params=None, **kwargs):
        """Anneal from the initial distribution to the posterior of ``model(*args, **kwargs)``.

        Like ``MCMC.run``, ``extra_fields`` and ``init_params`` are not passed to the model:
        ``init_params`` is refused (annealing starts from the initial distribution, see
        ``initial=``) and so is ``extra_fields`` (every per-temperature diagnostic is already
        in ``results[c].trace`` and ``to_arviz()``'s sample_stats). Runs in float64 (scoped:
        the process's JAX setting is unchanged afterwards). A second run, or a new ``HAIS``,
        on the same model and data shapes reuses the compiled code.
        """
        if extra_fields:
            raise TypeError(
                "HAIS.run takes no extra_fields (MCMC.run's): the per-temperature diagnostics "
                "are in hais.results[c].trace and in to_arviz()'s sample_stats"
            )
        if init_params is not None:
            raise TypeError(
                "HAIS.run takes no init_params: annealing starts from the initial "
                "distribution (HAIS(initial='prior' | 'laplace' | 'vi' | ph.Gaussian | "
                "(guide, params)))"
            )
        refuse_foreign_model(self.model)
        rng_key = check_key(rng_key)
        with jax.enable_x64(True):
            key_trace, key_run, self._key_draws = host_split(rng_key, 3)
            nt = NumPyroTarget(self.model, args, kwargs, key_trace)
            options = self.options
            if isinstance(options.initial, tuple) and len(options.initial) == 2:
                options = options.replace(initial=guide_initial(nt, *options.initial))
            self.evidence = evidence(key_run, nt, options, progress_bar=self.progress_bar,
                                     memory=self.memory)  # fmt: skip
        self._nt = nt
        self._samples = None

    def _require(self):
        if self.evidence is None:
            raise RuntimeError("call .run(rng_key, *args, **kwargs) first")

    # -- estimates
    @property
    def results(self):
        """The chains' :class:`ppl_hais.AISResult` (None before ``run``)."""
        return None if self.evidence is None else self.evidence.results

    @property
    def log_evidence(self) -> float:
        """log p(data | model): the pooled estimate over chains."""
        self._require()
        return self.evidence.log_z

    @property
    def log_evidence_se(self) -> float:
        """Its standard error (inf when the weights' variance does not exist)."""
        self._require()
        return self.evidence.log_z_se

    @property
    def warning(self) -> bool:
        """True when a trust check failed (see ``evidence.checks``)."""
        self._require()
        return self.evidence.warning

    @property
    def bias_gap(self) -> float:
        """The bias check's reverse estimate minus the forward one, in nats (NaN: not run)."""
        self._require()
        return self.evidence.bias_gap

    # -- posterior
    @float64
    def _constrained(self, zs, rng_key):
        """Constrained values (deterministic sites included) of flat particles (C, n, D)."""
        flat = jnp.asarray(zs.reshape(-1, zs.shape[-1]))
        keys = host_split(rng_key, flat.shape[0], as_array=True)
        values = constrain_batch(self._nt, flat, keys)
        return jax.tree.map(lambda v: np.asarray(v).reshape(zs.shape[:2] + np.shape(v)[1:]),
                            values)  # fmt: skip

    def _draws(self):
        """Resampled particles per chain, constrained, deterministic sites included."""
        if self._samples is None:
            self._require()
            idx = self.evidence.resample(self._key_draws)
            zs = np.stack([r.particles[i] for r, i in zip(self.results, idx, strict=True)])
            self._samples = self._constrained(zs, host_fold_in(self._key_draws, 1))
        return self._samples

    @staticmethod
    def _flat(samples, group_by_chain):
        return dict(samples) if group_by_chain else {
            k: v.reshape((-1,) + v.shape[2:]) for k, v in samples.items()}

    def get_samples(self, rng_key=None, num_samples=None, group_by_chain=False):
        """Posterior draws: particles resampled by weight.

        Without arguments, like ``MCMC.get_samples``: ``num_particles`` draws per chain, the
        same on every call (the ones ``print_summary`` and ``to_arviz`` show). With ``rng_key``
        and/or ``num_samples``, like ``NestedSampler.get_samples(rng_key, num_samples)``: fresh
        draws, ``num_samples`` per chain (default ``num_particles``).
        """
        if rng_key is None and num_samples is None:
            return self._flat(self._draws(), group_by_chain)
        self._require()
        rng_key = self._key_draws if rng_key is None else check_key(rng_key)
        key_idx, key_values = host_split(rng_key)
        idx = self.evidence.resample(key_idx, num_draws=num_samples)
        zs = np.stack([r.particles[i] for r, i in zip(self.results, idx, strict=True)])
        return self._flat(self._constrained(zs, key_values), group_by_chain)

    def get_weighted_samples(self, group_by_chain=False):
        """Every particle with its log importance weight, like
        ``NestedSampler.get_weighted_samples()``: ``(samples, log_weights)``. The weights are
        normalized to sum to 1 over all particles, each chain carrying an equal share (the pooled
        estimate averages the chains' Ẑ); ``group_by_chain`` keeps the chain axis (each chain's
        weights then sum to 1/num_chains)."""
        self._require()
        zs = np.stack([r.particles for r in self.results])
        lw = np.stack([r.log_weights - logsumexp(r.log_weights) for r in self.results])
        lw = lw - np.log(len(self.results))
        samples = self._constrained(zs, host_fold_in(self._key_draws, 2))
        if group_by_chain:
            return dict(samples), lw
        return self._flat(samples, False), lw.reshape(-1)

    def print_summary(self, prob=0.9):
        """The evidence with its error bar and checks, per-chain diagnostics, and the posterior
        summary. The posterior draws are particles resampled by weight: copies of a particle
        sit next to each other, so ``n_eff`` stays near the importance ESS printed above."""
        self._require()
        ev = self.evidence
        print(f"log marginal likelihood = {self.log_evidence:.4f} ± {self.log_evidence_se:.4f}"
              f"  ({self.num_chains} chain(s) × {self.num_particles} particles, {ev.num_steps} "
              f"temperatures, initial: {ev.initial}, {ev.gradients / 1e6:.2f} M gradients)")
        if len(ev.trajectory) > 1:
            rungs = ", ".join(f"{r.num_steps}: {r.log_z:.4f}" for r in ev.trajectory)
            print(f"  convergence ladder (temperatures: estimate): {rungs}")
        if ev.cleared:
            both = " and the previous rung" * (len(ev.trajectory) > 1)
            print(f"  checks {', '.join(ev.cleared)} failed but were cleared, the SE carrying "
                  "the doubt: " + ("the bridge of both directions is bounded within 0.2 nat "
                  "or agrees with the previous rung's "
                  "(ppl_hais.checks.ladder.bridge_clears)" if ev.bridged
                  else f"it agrees with the bias check{both} (ppl_hais.checks.ladder.clears)"))
        for c, r in enumerate(self.results):
            print(
                f"  chain {c}: {r.log_z:.4f} ± {r.log_z_se:.4f}, importance ESS {r.ess:.1f}, "
                f"Pareto k {r.pareto_k:.2f}, lag {r.lag:.2f}, "
                f"acceptance {np.mean(r.acceptance):.2f}, {r.wall_time:.1f} s"
            )
        if ev.bias is not None:
            b = ev.bias
            print(f"  bias check: reverse anneal from MCMC draws {ev.log_z_upper:.4f}, gap "
                  f"{ev.bias_gap:+.4f} ± {b.gap_se:.4f} nats; both directions bridged "
                  f"(Bennett) {b.log_z_bennett:.4f} ± {b.log_z_bennett_se:.4f}, " + (
                    f"the estimate (the forward {ev.log_z_forward:.4f} failed its checks)"
                    if ev.bridged else "a diagnostic, not the estimate") + ": its SE omits the "
                  "MCMC draws' error")  # fmt: skip
            if b.note:
                print(f"  NOTE {b.note}")
        for check in ev.checks:
            print(f"  WARNING {check}")
        numpyro.diagnostics.print_summary(
            {k: v for k, v in self.get_samples(group_by_chain=True).items()},
            prob=prob,
            group_by_chain=True,
        )

    @float64
    def to_arviz(self, pointwise_log_likelihood=True):
        """ArviZ output (DataTree on ArviZ >= 1, InferenceData on 0.x): posterior,
        sample_stats (``log_evidence``: the estimate), log_likelihood and observed_data."""
        self._require()
        posterior = self.get_samples(group_by_chain=True)
        log_lik = None
        # with enumerated sites the pointwise likelihood would be conditional on the drawn
        # discrete values, not the marginal one that LOO needs: left out
        if pointwise_log_likelihood and not self._nt.enumerated:
            latent = {k: jnp.asarray(v) for k, v in posterior.items() if k in self._nt.latent}
            ll = _pointwise_log_likelihood(
                self._nt.model, latent, *self._nt.args, batch_ndims=2, **self._nt.kwargs
            )
            log_lik = {k: np.asarray(v) for k, v in ll.items() if k in self._nt.observed}
        obs = {}
        tr = handlers.trace(
            handlers.seed(
                handlers.substitute(
                    self._nt.model, data={k: v[0, 0] for k, v in posterior.items()}
                ),
                host_key(0),
            )
        ).get_trace(*self._nt.args, **self._nt.kwargs)
        for name in self._nt.observed:
            obs[name] = np.asarray(tr[name]["value"])
        return from_ais(
            self.results,
            posterior,
            log_likelihood=log_lik,
            observed_data=obs,
            library="ppl_hais (numpyro)",
            checks=self.evidence.checks,
            initial=self.evidence.initial,
            trajectory=self.evidence.trajectory,
            bias=self.evidence.bias,
            evidence=self.evidence,
        )

    # -- the core's pieces, for users who want them
    @property
    def target(self):
        """The core ``AnnealingTarget`` the last run annealed."""
        self._require()
        return self.evidence.target
