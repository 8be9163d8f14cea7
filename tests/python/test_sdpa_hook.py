"""flashattn.torch.activate(): F.scaled_dot_product_attention (flash backend) runs on flashattn."""

import ast
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, current_flash_attention_impl, list_flash_attention_impls, sdpa_kernel

import flashattn.torch as fa_torch

CPU_FWD = "_scaled_dot_product_flash_attention_for_cpu"
CPU_BWD = CPU_FWD + "_backward"
CUDA_FWD = "_scaled_dot_product_flash_attention"
CUDA_BWD = CUDA_FWD + "_backward"


@pytest.fixture(autouse=True)
def _restore():
    fa_torch.stats.clear()
    yield
    fa_torch.deactivate()


def sdpa_outputs_and_grads(q, k, v, **kwargs):
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        out = F.scaled_dot_product_attention(q, k, v, **kwargs)
    dout = torch.ones_like(out) + torch.arange(out.shape[-1], device=out.device, dtype=out.dtype) / out.shape[-1]
    return out.detach(), torch.autograd.grad(out, (q, k, v), dout)


def compare_with_pytorch(q, k, v, fwd_op, bwd_op, atol, **kwargs):
    ref_out, ref_grads = sdpa_outputs_and_grads(q, k, v, **kwargs)
    assert not fa_torch.stats
    with fa_torch.activate():
        assert current_flash_attention_impl() == fa_torch.IMPL_NAME
        out, grads = sdpa_outputs_and_grads(q, k, v, **kwargs)
    assert current_flash_attention_impl() is None
    assert fa_torch.stats[fwd_op] == 1 and fa_torch.stats[bwd_op] == 1, dict(fa_torch.stats)
    torch.testing.assert_close(out, ref_out, atol=atol, rtol=0)
    for g, ref in zip(grads, ref_grads):
        torch.testing.assert_close(g, ref, atol=atol * 4, rtol=0)


def test_registered_under_its_name():
    assert fa_torch.IMPL_NAME in list_flash_attention_impls()


@pytest.mark.parametrize("is_causal", [False, True])
def test_cpu_sdpa_runs_on_flashattn(is_causal):
    q, k, v = (torch.randn(2, 4, 37, 64) for _ in range(3))
    compare_with_pytorch(q, k, v, CPU_FWD, CPU_BWD, atol=1e-5, is_causal=is_causal)


def test_cpu_gqa_and_scale():
    q = torch.randn(1, 8, 20, 32)
    k, v = (torch.randn(1, 2, 28, 32) for _ in range(2))
    compare_with_pytorch(q, k, v, CPU_FWD, CPU_BWD, atol=1e-5, enable_gqa=True, scale=0.2)


def test_cpu_unsupported_inputs_fall_back():
    q, k, v = (torch.randn(1, 2, 16, 12) for _ in range(3))  # head dim 12: not a multiple of 8
    ref, _ = sdpa_outputs_and_grads(q, k, v)
    handle = fa_torch.activate()
    out, _ = sdpa_outputs_and_grads(q, k, v)
    mask = torch.rand(16, 16) > 0.3
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        F.scaled_dot_product_attention(q.repeat(1, 1, 1, 8)[..., :64], q.repeat(1, 1, 1, 8)[..., :64],
                                       q.repeat(1, 1, 1, 8)[..., :64], attn_mask=mask)
    handle.remove()
    torch.testing.assert_close(out, ref)
    assert fa_torch.stats[CPU_FWD] == 0 and fa_torch.stats[CPU_FWD + ":fallback"] == 2


def test_cpu_scale_zero_falls_back():
    # The library reads a scale of 0 as its default (1 / sqrt(d)): PyTorch's kernel answers (uniform
    # weights, v's mean), forward and backward.
    q, k, v = (torch.randn(1, 2, 16, 32) for _ in range(3))
    ref_out, ref_grads = sdpa_outputs_and_grads(q, k, v, scale=0.0)
    torch.testing.assert_close(ref_out, v.mean(2, keepdim=True).expand_as(ref_out), atol=1e-6, rtol=0)
    with fa_torch.activate():
        out, grads = sdpa_outputs_and_grads(q, k, v, scale=0.0)
    assert fa_torch.stats[CPU_FWD] == 0 and fa_torch.stats[CPU_FWD + ":fallback"] == 1, dict(fa_torch.stats)
    torch.testing.assert_close(out, ref_out)
    for g, ref in zip(grads, ref_grads):
        torch.testing.assert_close(g, ref)


def test_cpu_causal_with_unequal_lengths_falls_back():
    # SDPA aligns is_causal top-left, flashattn bottom-right: PyTorch's kernel must answer.
    q = torch.randn(1, 2, 10, 32)
    k, v = (torch.randn(1, 2, 16, 32) for _ in range(2))
    ref, ref_grads = sdpa_outputs_and_grads(q, k, v, is_causal=True)
    with fa_torch.activate():
        out, grads = sdpa_outputs_and_grads(q, k, v, is_causal=True)
    assert fa_torch.stats[CPU_FWD] == 0 and fa_torch.stats[CPU_FWD + ":fallback"] == 1
    torch.testing.assert_close(out, ref)


def test_handle_restores_pytorch_kernels():
    q, k, v = (torch.randn(1, 2, 16, 32) for _ in range(3))
    fa_torch.activate()
    handle = fa_torch.activate()  # activating again replaces the first registration
    assert fa_torch.is_active()
    handle.remove()
    assert not fa_torch.is_active()
    sdpa_outputs_and_grads(q, k, v)
    assert not fa_torch.stats


def test_compiled_model_uses_the_hook():
    q, k, v = (torch.randn(1, 2, 16, 32) for _ in range(3))

    def attend(q, k, v):
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    expected = attend(q, k, v)
    with fa_torch.activate():
        got = torch.compile(attend, fullgraph=True, backend="aot_eager")(q, k, v)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    assert fa_torch.stats[CPU_FWD] >= 1


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("headdim", [64, 128])
def test_cuda_sdpa_runs_on_flashattn(dtype, is_causal, headdim):
    q, k, v = (torch.randn(2, 8, 300, headdim, device="cuda", dtype=dtype) for _ in range(3))
    atol = 4e-3 if dtype == torch.float16 else 2e-2
    compare_with_pytorch(q, k, v, CUDA_FWD, CUDA_BWD, atol=atol, is_causal=is_causal)


@pytest.mark.gpu
def test_cuda_unsupported_inputs_fall_back():
    # Dropout is what flashattn refuses and PyTorch's FLASH backend takes on CUDA (SDPA pads head
    # dims to multiples of 8 before the flash operator, so those reach flashattn). PyTorch's flash
    # kernel then answers, and reaches aten::_flash_attention_forward, which falls back as well.
    q, k, v = (torch.randn(2, 4, 128, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    with fa_torch.activate():
        dropped = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)  # no backend forced
    assert fa_torch.stats[CUDA_FWD + ":fallback"] == 1 and fa_torch.stats[CUDA_FWD] == 0, dict(fa_torch.stats)
    assert fa_torch.stats["_flash_attention_forward:fallback"] == 1, dict(fa_torch.stats)
    assert fa_torch.stats["_flash_attention_forward"] == 0, dict(fa_torch.stats)
    assert dropped.isfinite().all()


class TinyCausalAttentionModel(torch.nn.Module):
    """Two attention blocks calling F.scaled_dot_product_attention, as most models do."""

    def __init__(self, dim=256, nheads=4):
        super().__init__()
        self.nheads = nheads
        self.blocks = torch.nn.ModuleList(
            torch.nn.ModuleDict({"qkv": torch.nn.Linear(dim, 3 * dim), "proj": torch.nn.Linear(dim, dim)})
            for _ in range(2))

    def forward(self, x):
        batch, seqlen, dim = x.shape
        for block in self.blocks:
            q, k, v = block["qkv"](x).view(batch, seqlen, 3, self.nheads, -1).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + block["proj"](y.transpose(1, 2).reshape(batch, seqlen, dim))
        return x


@pytest.mark.gpu
def test_cuda_model_outputs_and_gradients_match():
    model = TinyCausalAttentionModel().cuda().bfloat16()
    x = torch.randn(4, 200, 256, device="cuda", dtype=torch.bfloat16)

    def run():
        model.zero_grad()
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            y = model(x)
        y.float().square().mean().backward()
        return y.detach(), [p.grad.clone() for p in model.parameters()]

    ref_y, ref_grads = run()
    with fa_torch.activate():
        y, grads = run()
    assert fa_torch.stats[CUDA_FWD] == 2 and fa_torch.stats[CUDA_BWD] == 2, dict(fa_torch.stats)
    torch.testing.assert_close(y, ref_y, atol=3e-2, rtol=3e-2)
    for g, ref in zip(grads, ref_grads):
        torch.testing.assert_close(g, ref, atol=3e-2, rtol=5e-2)


@pytest.mark.gpu
def test_cuda_varlen_op_runs_on_flashattn():
    from torch.nn.attention.varlen import varlen_attn

    cu = torch.tensor([0, 100, 250, 300], device="cuda", dtype=torch.int32)
    q, k, v = (torch.randn(300, 8, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))

    def run():
        out = varlen_attn(q, k, v, cu, cu, 150, 150, window_size=(-1, 0))
        return out.detach(), torch.autograd.grad(out.float().square().sum(), (q, k, v))

    expected, expected_grads = run()
    with fa_torch.activate():
        got, got_grads = run()
    assert fa_torch.stats["_flash_attention_forward"] == 1, dict(fa_torch.stats)
    assert fa_torch.stats["_flash_attention_backward"] == 1, dict(fa_torch.stats)
    torch.testing.assert_close(got, expected, atol=1.6e-2, rtol=0)
    for g, ref in zip(got_grads, expected_grads):
        torch.testing.assert_close(g, ref, atol=6e-2, rtol=2e-2)


@pytest.mark.gpu
def test_cuda_compiled_model_uses_the_hook():
    model = TinyCausalAttentionModel().cuda().bfloat16()
    x = torch.randn(2, 256, 256, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        expected = model(x)
        with fa_torch.activate():
            got = torch.compile(model, fullgraph=True)(x)
    assert fa_torch.stats[CUDA_FWD] >= 1, dict(fa_torch.stats)
    torch.testing.assert_close(got, expected, atol=3e-2, rtol=3e-2)


# Run in a fresh interpreter: PyTorch sets its default SDPA backend order at the first CUDA SDPA
# call of a process, which in this test process has long happened.
_FRESH_PROCESS = textwrap.dedent("""
    import sys
    import torch
    import torch.nn.functional as F

    q = torch.randn(2, 4, 256, 64, device="cuda", dtype=torch.bfloat16)
    if sys.argv[1] == "activate-first":
        import flashattn.torch as fa_torch

        with fa_torch.activate():
            F.scaled_dot_product_attention(q, q, q, is_causal=True)
        print(dict(fa_torch.stats))
    else:
        F.scaled_dot_product_attention(q, q, q, is_causal=True)
    print(torch._C._get_sdp_priority_order())
""")


def run_fresh(mode):
    done = subprocess.run([sys.executable, "-c", _FRESH_PROCESS, mode], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return [ast.literal_eval(line) for line in done.stdout.strip().splitlines()]


@pytest.mark.gpu
def test_cuda_activate_before_any_sdpa_call_reaches_the_hook_and_restores_the_order():
    (pytorch_order,) = run_fresh("plain")
    stats, order_after = run_fresh("activate-first")
    # No backend forced (test_cuda_compiled_model_uses_the_hook covers torch.compile).
    assert stats.get(CUDA_FWD) == 1, (stats, pytorch_order)
    assert order_after == pytorch_order
