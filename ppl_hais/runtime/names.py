"""Unknown keyword arguments refused the way Python refuses them, with the closest known name.

Example
-------
>>> from ppl_hais.runtime.names import suggest_keywords
>>> @suggest_keywords
... def run(*, num_particles=512):
...     return num_particles
>>> run(num_particle=100)
Traceback (most recent call last):
    ...
TypeError: run() got an unexpected keyword argument 'num_particle' (did you mean 'num_particles'?)
"""

from __future__ import annotations

import functools
import inspect

# ``num_steps`` counts temperatures in the annealer and leapfrog steps in NumPyro's HMC; the
# samplers here call the latter num_leapfrog
LEAPFROG_HINT = {"num_steps": "leapfrog steps per transition are num_leapfrog="}


def did_you_mean(name: str, known) -> str:
    """" (did you mean 'x'?)" for the closest of ``known`` names, or ""."""
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def suggest_keywords(fn):
    """``fn`` with Python's refusal of an unknown keyword argument, plus the closest known name
    (a typo in a long option list is the commonest first mistake)."""
    params = inspect.signature(fn).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return fn
    known = [n for n, p in params.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
    where = fn.__qualname__

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        refuse_unknown({k: v for k, v in kwargs.items() if k not in params}, where, known)
        return fn(*args, **kwargs)

    return wrapper


def refuse_unknown(kwargs: dict, where: str, known=(), hints=None) -> None:
    """A TypeError like Python's own for keywords left in ``kwargs``, with the closest of
    ``known`` names suggested, or ``hints[name]`` where a name means something else here."""
    if kwargs:
        name = next(iter(kwargs))
        hint = f" ({hints[name]})" if hints and name in hints else did_you_mean(name, known)
        raise TypeError(f"{where}() got an unexpected keyword argument {name!r}{hint}")
