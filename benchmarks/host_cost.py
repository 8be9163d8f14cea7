"""Host time per call of the package's pieces on a CUDA device, beside SDPA's FLASH backend (FA2):
where the host time of a forward + backward goes (session 6: 0.88 ms per call for ours against
0.33 ms for FA2 at d128 512 causal, more than the GPU time, so short rows were timed on the host).

    python3 benchmarks/host_cost.py [--reps 200]   # or --decode-only: the decode step's lines alone

Each line: microseconds of host time per call over `reps` calls enqueued back to back, and the wall
time per call once the device is done. At the tiny shape the GPU is never the limit, so the host
column is the host's cost; a piece that synchronises has host == wall at the large shape.
"""
import argparse
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashattn
from flashattn import _ext
from flashattn._torch_util import kernel_ready, launch_options, output_dlpack


def per_call(fn, reps):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return (t1 - t0) / reps * 1e6, (t2 - t0) / reps * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args()
    for b, n, h in ((1, 128, 1), (32, 512, 16)):
        d = 128
        q, k, v, do = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
        qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
        out = torch.empty_like(q)
        lse = torch.empty(b, h, n, device="cuda", dtype=torch.float32)
        dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
        opts = dict(launch_options(q), softmax_scale=d ** -0.5, causal=True)
        _ext.forward(q, k, v, out, lse, **opts)

        def fwd_bwd():
            flashattn.flash_attn_func(qg, kg, vg, causal=True).backward(do)
            qg.grad = kg.grad = vg.grad = None

        def fa2_fwd():
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                      is_causal=True)

        def fa2_fwd_bwd():
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                o = F.scaled_dot_product_attention(qg.transpose(1, 2), kg.transpose(1, 2), vg.transpose(1, 2),
                                                   is_causal=True)
            o.backward(do.transpose(1, 2))
            qg.grad = kg.grad = vg.grad = None

        def cudnn_fwd():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                      is_causal=True)

        # The extension as the package calls it: DLPack capsules (ops.py). Handing it the tensors
        # themselves makes it call Tensor.__dlpack__ on each (~5 us apiece here, more on the device's
        # host: session 72 read 44 us a forward that way), which no package path does.
        pieces = {
            "_ext.forward (capsules, outputs given)": lambda: _ext.forward(
                *map(kernel_ready, (q, k, v)), *map(output_dlpack, (out, lse)), **opts),
            "_ext.backward (capsules, outputs given)": lambda: _ext.backward(
                *map(kernel_ready, (do, q, k, v, out, lse)), *map(output_dlpack, (dq, dk, dv)), **opts),
            "_ext.forward (tensors: __dlpack__ each)": lambda: _ext.forward(q, k, v, out, lse, **opts),
            "flash_attn_func forward (no grad)": lambda: flashattn.flash_attn_func(q, k, v, causal=True),
            "flash_attn_func forward + backward": fwd_bwd,
            "fa2 forward": fa2_fwd,
            "cudnn forward": cudnn_fwd,
            "fa2 forward + backward": fa2_fwd_bwd,
            "torch.empty x3": lambda: [torch.empty_like(t) for t in (q, k, v)],
        }
        for name, fn in pieces.items():
            host, wall = per_call(fn, args.reps)
            print(f"b{b} s{n} h{h} d{d} causal | {name:40s} host {host:8.1f} us/call  wall {wall:8.1f} us/call",
                  flush=True)


def split_backward(reps):
    """At the tiny shape: forward with grad and backward timed apart (reps graphs built first), the
    time inside the library's Python backward (ops._grads), and a one-line Python autograd.Function
    on CUDA for the engine's own cost of a Python backward node."""
    from flashattn import ops
    b, n, h, d = 1, 128, 1, 128
    q, k, v, do = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    inside = []
    grads = ops._grads

    def timed_grads(*a, **kw):
        t0 = time.perf_counter()
        r = grads(*a, **kw)
        inside.append(time.perf_counter() - t0)
        return r
    ops._grads = timed_grads
    ops._EagerAttention.backward = staticmethod(ops._backward_with(timed_grads))

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    def ours_fwd():
        return flashattn.flash_attn_func(qg, kg, vg, causal=True)

    def fa2_fwd():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(qg.transpose(1, 2), kg.transpose(1, 2), vg.transpose(1, 2),
                                                  is_causal=True).transpose(1, 2)

    for name, fwd in (("ours", ours_fwd), ("fa2", fa2_fwd), ("python Function x*2", lambda: Scale.apply(qg)),
                      ("x*2 (C++ node)", lambda: qg * 2)):
        for _ in range(10):
            fwd().backward(do)
        torch.cuda.synchronize()
        inside.clear()
        t0 = time.perf_counter()
        outs = [fwd() for _ in range(reps)]
        t1 = time.perf_counter()
        for o in outs:
            o.backward(do)
        t2 = time.perf_counter()
        torch.cuda.synchronize()
        body = f", inside ops._grads {sum(inside) / len(inside) * 1e6:7.1f} us" if inside else ""
        print(f"b1 s128 h1 d128 causal | {name:20s} forward with grad {(t1 - t0) / reps * 1e6:7.1f} us/call, "
              f"backward {(t2 - t1) / reps * 1e6:7.1f} us/call{body}", flush=True)
        qg.grad = kg.grad = vg.grad = None
    ops._grads = grads


def pieces(reps):
    """At the tiny shape: each step of the package's forward and backward paths alone (us a call),
    and the autograd node's own cost for a Function shaped as ours (17 inputs, 10 saved, 17
    gradients returned) with a backward that launches nothing, beside a one-input Function."""
    from flashattn import ops
    from flashattn._torch_util import on_device
    b, n, h, d = 1, 128, 1, 128
    q, k, v, do = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    out, lse = ops._run_forward(q, k, v, None, None, 0, 0, d ** -0.5, True, -1, -1, 0.0, None)
    dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
    opts = dict(launch_options(q), softmax_scale=d ** -0.5, causal=True)
    index = q.get_device()

    def enter_device():
        with on_device(q):
            pass

    steps = {
        "empty_like x3 (contiguous_format)": lambda: [torch.empty_like(t, memory_format=torch.contiguous_format)
                                                     for t in (q, k, v)],
        "kernel_ready x6": lambda: [kernel_ready(t) for t in (do, q, k, v, out, lse)],
        "kernel_ready x4 None": lambda: [kernel_ready(None) for _ in range(4)],
        "output_dlpack x3": lambda: [output_dlpack(t) for t in (dq, dk, dv)],
        "torch.utils.dlpack.to_dlpack x1": lambda: torch.utils.dlpack.to_dlpack(q),
        "launch_options(q)": lambda: launch_options(q),
        "torch.cuda.current_stream(dev).cuda_stream": lambda: torch.cuda.current_stream(q.device).cuda_stream,
        "torch._C._cuda_getCurrentRawStream(index)": lambda: torch._C._cuda_getCurrentRawStream(index),
        "on_device(q) enter + exit": enter_device,
        "_ext.backward (capsules made in the call)": lambda: _ext.backward(
            *map(kernel_ready, (do, q, k, v, out, lse)), *map(output_dlpack, (dq, dk, dv)), **opts),
        "_ext.forward (capsules made in the call)": lambda: _ext.forward(
            *map(kernel_ready, (q, k, v)), *map(output_dlpack, (out, lse)), **opts),
        "ops._grads": lambda: ops._grads(do, q, k, v, out, lse, None, None, 0, 0, d ** -0.5, True, -1, -1, 0.0,
                                         None, False),
        "ops._run_forward": lambda: ops._run_forward(q, k, v, None, None, 0, 0, d ** -0.5, True, -1, -1, 0.0,
                                                     None),
    }
    for name, fn in steps.items():
        host, wall = per_call(fn, reps)
        print(f"b1 s128 h1 d128 causal | piece {name:44s} host {host:8.1f} us/call  wall {wall:8.1f} us/call",
              flush=True)

    grads_ready = (dq, dk, dv)

    class Shaped(torch.autograd.Function):  # our node's shape, nothing launched
        @staticmethod
        def forward(ctx, *inputs):
            ctx.save_for_backward(*inputs[:3], out, lse, inputs[3], inputs[4], inputs[12], inputs[14], inputs[15])
            ctx.options = inputs[5:12]
            ctx.mark_non_differentiable(lse)
            ctx.set_materialize_grads(False)
            return out.clone(), lse.clone()

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, dout, _dlse):
            _ = ctx.saved_tensors
            return grads_ready + (None,) * 14

    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    inputs = (qg, kg, vg, None, None, 0, 0, d ** -0.5, True, -1, -1, 0.0, None, False, None, None, 0)
    for _ in range(10):
        Shaped.apply(*inputs)[0].backward(do)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    outs = [Shaped.apply(*inputs)[0] for _ in range(reps)]
    t1 = time.perf_counter()
    for o in outs:
        o.backward(do)
    t2 = time.perf_counter()
    torch.cuda.synchronize()
    print(f"b1 s128 h1 d128 causal | {'Function shaped as ours, no launch':34s} forward with grad "
          f"{(t1 - t0) / reps * 1e6:7.1f} us/call (two clones inside), backward {(t2 - t1) / reps * 1e6:7.1f} us/call",
          flush=True)


def decode_steps(reps):
    """flash_attn_with_kvcache's decode step (1 query row, 32 / 8 heads, d128, 4096 used keys) on a
    contiguous cache and on 256-row pages, beside flash_attn_func on the 4096 keys, and the pieces
    of the paged step's index read-back one by one (session 80: an eager paged step cost 155-185 us
    of host time against 83 for the contiguous one with an int length; which piece is it?)."""
    from flashattn import kvcache, ops
    b, hq, hk, d, used, rows, page = 1, 32, 8, 128, 4096, 32768, 256
    q = torch.randn(b, 1, hq, d, device="cuda", dtype=torch.bfloat16)
    k_cache, v_cache = (torch.randn(b, rows, hk, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    k_used, v_used = k_cache[:, :used].contiguous(), v_cache[:, :used].contiguous()
    blocks = rows // page
    table = torch.randperm(b * blocks, device="cuda").view(b, blocks).to(torch.int32)
    k_pages, v_pages = (c.view(b * blocks, page, hk, d)[table.view(-1).long().argsort()] for c in (k_cache, v_cache))
    lengths = torch.full((b,), used, dtype=torch.int32, device="cuda")
    flat = table.flatten()
    scale = d ** -0.5

    def library_forward(k, v, **decode):  # non-causal, no window, soft-cap or ALiBi: the steps' own options
        return ops._run_forward(q, k, v, None, None, 0, 0, scale, False, -1, -1, 0.0, None, **decode)

    def read_back():
        return kvcache._finish_read_back(kvcache._start_read_back([flat]))

    def copy_and_event():
        return kvcache._start_read_back([flat])

    def event_only():
        e = torch.cuda.Event()
        e.record()
        e.synchronize()

    steps = {
        "flash_attn_func on the used keys": lambda: flashattn.flash_attn_func(q, k_used, v_used),
        "kvcache contiguous, int length": lambda: flashattn.flash_attn_with_kvcache(
            q, k_cache, v_cache, cache_seqlens=used),
        "kvcache contiguous, tensor lengths": lambda: flashattn.flash_attn_with_kvcache(
            q, k_cache, v_cache, cache_seqlens=lengths),
        "kvcache paged, int length": lambda: flashattn.flash_attn_with_kvcache(
            q, k_pages, v_pages, block_table=table, cache_seqlens=used),
        "kvcache paged, tensor lengths": lambda: flashattn.flash_attn_with_kvcache(
            q, k_pages, v_pages, block_table=table, cache_seqlens=lengths),
        # The library's own forward, no kvcache Python around it (session 81: the paged step
        # with an int length cost ~47 us over the contiguous one, ~15 of it the read-back; is
        # the rest the library's paged route? With FLASHATTN_CUDA_KERNELS=sm80 in the
        # environment the contiguous line takes the sm80 route too, the paged one's.)
        "piece: library forward, pages + lengths": lambda: library_forward(
            k_pages, v_pages, seqused_k=lengths, block_table=table, indices_checked=True),
        "piece: library forward, contiguous + lengths": lambda: library_forward(
            k_cache, v_cache, seqused_k=lengths, indices_checked=True),
        "piece: library forward, the used rows' view": lambda: library_forward(
            k_cache[:, :used], v_cache[:, :used]),
        "piece: torch.cat of the table": lambda: torch.cat([flat]),
        # A one-tensor read-back makes no cat since session 81 (the line was "cat + pinned copy +
        # event" in session 80's numbers).
        "piece: pinned copy + event (one tensor)": copy_and_event,
        "piece: the whole read-back (waits)": read_back,
        "piece: an event recorded and waited on": event_only,
        "piece: torch.full of the lengths": lambda: torch.full((b,), used, dtype=torch.int32, device="cuda"),
    }
    for name, fn in steps.items():
        host, wall = per_call(fn, reps)
        print(f"decode b{b} h{hq}/{hk} d{d} {used} of {rows} keys | {name:38s} host {host:8.1f} us/call  "
              f"wall {wall:8.1f} us/call", flush=True)


if __name__ == "__main__":
    import sys
    if "--decode-only" in sys.argv:
        decode_steps(300)
    else:
        main()
        split_backward(200)
        pieces(500)
        decode_steps(300)
