"""flashattn.array on NumPy arrays (CPU) and, where a GPU exists, on CUDA arrays via DLPack."""

import numpy as np
import pytest
import torch

from flashattn import array
from reference import attention, cu_seqlens, varlen_attention


def np_inputs(shape_q, shape_k, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape_q).astype(dtype), rng.standard_normal(shape_k).astype(dtype),
            rng.standard_normal(shape_k).astype(dtype))


def test_numpy_forward_backward():
    q, k, v = np_inputs((2, 30, 4, 32), (2, 40, 2, 32))
    out, lse = array.forward(q, k, v, causal=True, softcap=3.0, return_lse=True)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and lse.shape == (2, 4, 30)
    tq, tk, tv = (torch.from_numpy(a).double().requires_grad_() for a in (q, k, v))
    ref, ref_lse = attention(tq, tk, tv, causal=True, softcap=3.0)
    np.testing.assert_allclose(out, ref.detach().numpy(), atol=1e-5, rtol=1e-4)
    np.testing.assert_allclose(lse, ref_lse.detach().numpy(), atol=1e-5, rtol=1e-4)

    dout = np.random.default_rng(1).standard_normal(out.shape).astype(np.float32)
    dq, dk, dv = array.backward(dout, q, k, v, out, lse, causal=True, softcap=3.0)
    expected = torch.autograd.grad(ref, (tq, tk, tv), torch.from_numpy(dout).double())
    for actual, exp in zip((dq, dk, dv), expected):
        np.testing.assert_allclose(actual, exp.numpy(), atol=1e-4, rtol=1e-3)


def test_numpy_float16_and_read_only_inputs():
    q, k, v = np_inputs((1, 16, 2, 64), (1, 16, 2, 64), dtype=np.float16)
    for a in (q, k, v):
        a.setflags(write=False)
    out = array.forward(q, k, v)
    ref, _ = attention(*(torch.from_numpy(a.copy()) for a in (q, k, v)))
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float64), ref.numpy(), atol=1e-2)


def test_numpy_varlen_and_reference_backend():
    lengths = [4, 9, 1]
    q, k, v = np_inputs((14, 2, 16), (14, 2, 16))
    cu = cu_seqlens(lengths).numpy()
    out = array.forward(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=9, max_seqlen_k=9, causal=True)
    oracle = array.forward(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, causal=True, backend="cpu_reference")
    ref, _ = varlen_attention(*(torch.from_numpy(a) for a in (q, k, v)), torch.from_numpy(cu), torch.from_numpy(cu),
                              causal=True)
    np.testing.assert_allclose(out, ref.numpy(), atol=1e-5)
    np.testing.assert_allclose(oracle, ref.numpy(), atol=1e-6)


def test_caller_provided_output_and_errors():
    q, k, v = np_inputs((1, 8, 2, 16), (1, 8, 2, 16))
    out = np.zeros_like(q)
    assert array.forward(q, k, v, out=out) is out and np.abs(out).sum() > 0
    with pytest.raises(TypeError, match="float64"):
        array.forward(q.astype(np.float64), k, v)
    with pytest.raises(ValueError, match="backend"):
        array.forward(q, k, v, backend="tpu")
    with pytest.raises(ValueError, match="last-dimension stride"):
        array.forward(np.asfortranarray(q), k, v)
    with pytest.raises(TypeError, match="DLPack"):
        array.forward([1.0], k, v)
    with pytest.raises(ValueError, match="argument 'out': shares memory with input 'q'"):
        array.forward(q, k, v, out=q)
    # The library's own API takes only -1 for an unbounded side (flash_attn_func maps any negative).
    with pytest.raises(ValueError, match="argument 'window_left': is -5"):
        array.forward(q, k, v, window_size=(-5, 0))
    with pytest.raises(ValueError, match="argument 'window_right': is -2"):
        array.forward(q, k, v, window_size=(4, -2))
    kv = np.zeros((1, 8, 2, 2, 16), np.float32)  # dk, dv interleaved in one buffer: their own elements
    out, lse = array.forward(q, k, v, return_lse=True)
    dout = np.ones_like(q)
    dq, dk, dv = array.backward(dout, q, k, v, out, lse, dk=kv[:, :, 0], dv=kv[:, :, 1])
    expected = array.backward(dout, q, k, v, out, lse)
    for actual, separate in zip((dk, dv), expected[1:]):
        np.testing.assert_allclose(actual, separate, atol=1e-6)
    with pytest.raises(ValueError, match="argument 'dv': shares memory with output 'dk'"):
        array.backward(dout, q, k, v, out, lse, dk=kv[:, :, 0], dv=kv[:, :, 0])


@pytest.mark.gpu
def test_cuda_arrays_through_dlpack():
    # torch CUDA tensors stand in for any CUDA DLPack producer; CuPy is tried when installed.
    q, k, v = (torch.randn(2, 64, 4, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    out = array.forward(q, k, v, causal=True)
    assert out.is_cuda and out.dtype == torch.bfloat16
    ref, _ = attention(q.float(), k.float(), v.float(), causal=True)
    torch.testing.assert_close(out.float(), ref.float(), atol=2e-2, rtol=0)
    cupy = pytest.importorskip("cupy")
    cq, ck, cv = (cupy.from_dlpack(t) for t in (q, k, v))
    cout = array.forward(cq, ck, cv, causal=True)
    torch.testing.assert_close(torch.from_dlpack(cout), out)


def jax_or_skip(platform):
    jax = pytest.importorskip("jax", reason="jax is not installed")
    try:
        devices = jax.devices(platform)
    except RuntimeError as err:
        pytest.skip(f"jax has no {platform} backend here: {err}")
    return jax, devices[0]


def check_jax_forward_backward(jax, device, dtype, atol):
    import jax.numpy as jnp

    q, k, v = np_inputs((2, 33, 4, 64), (2, 47, 2, 64))
    jq, jk, jv = (jax.device_put(jnp.asarray(a, dtype=dtype), device) for a in (q, k, v))
    out, lse = array.forward(jq, jk, jv, causal=True, return_lse=True)
    # New JAX arrays on the inputs' device, not views of anything the caller owns.
    assert isinstance(out, jax.Array) and isinstance(lse, jax.Array)
    assert out.dtype == dtype and lse.dtype == jnp.float32 and lse.shape == (2, 4, 33)
    assert out.devices() == {device} and lse.devices() == {device}
    tq, tk, tv = (torch.from_numpy(np.array(a.astype(jnp.float32))).double().requires_grad_() for a in (jq, jk, jv))
    ref, ref_lse = attention(tq, tk, tv, causal=True)
    np.testing.assert_allclose(np.asarray(out.astype(jnp.float32)), ref.detach().numpy(), atol=atol, rtol=0)
    np.testing.assert_allclose(np.asarray(lse), ref_lse.detach().numpy(), atol=1e-3, rtol=0)

    dout = jnp.asarray(np.random.default_rng(1).standard_normal(out.shape), dtype=dtype)
    dq, dk, dv = array.backward(dout, jq, jk, jv, out, lse, causal=True)
    expected = torch.autograd.grad(ref, (tq, tk, tv), torch.from_numpy(np.array(dout.astype(jnp.float32))).double())
    for actual, exp, inp in zip((dq, dk, dv), expected, (jq, jk, jv)):
        assert isinstance(actual, jax.Array) and actual.shape == inp.shape and actual.dtype == dtype
        np.testing.assert_allclose(np.asarray(actual.astype(jnp.float32)), exp.numpy(), atol=atol * 4, rtol=0)
    # Results stay valid after flashattn's side is gone and JAX computes with them.
    del q, k, v
    assert bool(jnp.isfinite(out.astype(jnp.float32) + dq.astype(jnp.float32)).all())


def test_jax_cpu_arrays_come_back_as_new_jax_arrays():
    jax, device = jax_or_skip("cpu")
    import jax.numpy as jnp

    check_jax_forward_backward(jax, device, jnp.float32, atol=1e-5)


def test_jax_outputs_refused_writable_buffers_written():
    jax, device = jax_or_skip("cpu")
    import jax.numpy as jnp

    q, k, v = np_inputs((1, 8, 2, 16), (1, 8, 2, 16))
    jq, jk, jv = (jnp.asarray(a) for a in (q, k, v))
    before = np.asarray(jq).copy()
    with pytest.raises(TypeError, match="immutable"):
        array.forward(jq, jk, jv, out=jnp.zeros_like(jq))
    with pytest.raises(TypeError, match="immutable"):
        array.backward(jq, jq, jk, jv, jq, jnp.zeros((1, 2, 8)), dv=jnp.zeros_like(jv))
    np.testing.assert_array_equal(np.asarray(jq), before)
    out = np.zeros_like(q)
    assert array.forward(jq, jk, jv, out=out) is out
    np.testing.assert_allclose(out, array.forward(q, k, v), atol=0)


@pytest.mark.gpu
def test_jax_cuda_arrays_come_back_as_new_jax_arrays():
    jax, device = jax_or_skip("gpu")
    import jax.numpy as jnp

    check_jax_forward_backward(jax, device, jnp.bfloat16, atol=2e-2)


def test_numpy_arguments_refused_by_name():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 8, 2, 32)).astype(np.float32)
    k, v = q.copy(), q.copy()
    read_only = np.empty_like(q)
    read_only.flags.writeable = False
    for exc, name, options in [
            (TypeError, "causal", dict(causal="no")), (TypeError, "causal", dict(causal=2)),
            (TypeError, "window_size", dict(window_size=(1.5, 0))), (ValueError, "window_size", dict(window_size=3)),
            (ValueError, "max_seqlen_q", dict(max_seqlen_q=2**40)), (TypeError, "max_seqlen_q", dict(max_seqlen_q=1.5)),
            (ValueError, "num_threads", dict(num_threads=2**40)), (TypeError, "stream", dict(stream=-1)),
            (TypeError, "stream", dict(stream="x")), (TypeError, "softcap", dict(softcap="x")),
            (TypeError, "'k'", dict(k=[1.0])), (TypeError, "cu_seqlens_q", dict(cu_seqlens_q=[0, 4, 8])),
            (ValueError, "'out'", dict(out=read_only))]:
        inputs = [options.pop(n, default) for n, default in (("q", q), ("k", k), ("v", v))]
        with pytest.raises(exc, match=name):
            array.forward(*inputs, **options)
    out = array.forward(q, k, v, causal=np.bool_(True))
    assert np.isfinite(out).all()
    with pytest.raises(TypeError, match="'lse'"):
        array.backward(q, q, k, v, out, None)
