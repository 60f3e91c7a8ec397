import jax
import pytest

jax.config.update("jax_enable_x64", True)


@pytest.fixture(autouse=True)
def _strict_broadcasting(request):
    """Catch silent broadcasting in our code (Equinox's habit). NumPyro's distributions rely on
    rank promotion internally, so its adapter tests run with the default."""
    if "numpyro" in request.module.__name__:
        yield
        return
    with jax.numpy_rank_promotion("raise"):
        yield


@pytest.fixture
def key():
    return jax.random.key(20261122)
