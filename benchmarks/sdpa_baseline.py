#!/usr/bin/env python3
"""PyTorch SDPA (FLASH backend) decode on contiguous KV: the baseline for
benchmarks/paged_attention_bench.cu, on the same shapes (bf16, head dim 128, one query token,
batch {1, 8, 16, 64, 256} x context {512, 4096, 16384} x heads {32q/8kv, 32q/32kv}); in the
same process, a device-to-device copy of 2 GiB (the ceiling, read plus written, as the paged
benchmark measures its own) and SDPA prefill chunks of 2048 tokens over 0 and 4096 cached
(causal, aligned bottom-right as rungs' prefill is), as comment lines ('#').

Prints the median time per shape and the GB/s over the same byte count the paged benchmark
uses (K and V once, Q, O; no block tables), so the two can be compared row by row. Timed as
the paged benchmark is: a CUDA graph of up to 20 back-to-back calls (~200 us) replayed between
events, time per call = graph time / calls, so Python's launch overhead stays out of small
shapes. A shape that fails (capture included) is reported in its row and makes the exit
status 1. Needs a CUDA build of PyTorch (2.5+ for enable_gqa); without one it says so and exits
0, or 1 when RUNGS_REQUIRE_GPU is set (scripts/gpu-check sets it and runs this script when
`python3 -c "import torch"` works).

    python3 benchmarks/sdpa_baseline.py [--quick] [--csv]
"""
import argparse
import os
import sys


def median_ms(torch, stream, work, runs):
    times = []
    for _ in range(runs):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record(stream)
        work()
        stop.record(stream)
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    times.sort()
    return times[len(times) // 2]


def first_line(e):
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def time_calls(torch, fn, runs):
    """(microseconds per call, note) from replaying a CUDA graph of back-to-back calls."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(5):
            fn()
        single = median_ms(torch, stream, fn, 3)
    torch.cuda.current_stream().wait_stream(stream)
    reps = max(1, min(20, int(0.2 / max(single, 1e-3))))
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(reps):
                fn()
    except RuntimeError as e:
        # After a failed capture the stream and the allocator's graph pool are suspect: report
        # the shape as failed rather than time it some other way.
        raise RuntimeError(f"CUDA graph capture failed: {first_line(e)}") from e
    with torch.cuda.stream(stream):
        graph.replay()
        ms = median_ms(torch, stream, graph.replay, runs)
    return ms / reps * 1e3, ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 timed runs per shape instead of 50")
    parser.add_argument("--csv", action="store_true", help="machine-readable output")
    args = parser.parse_args()
    required = os.environ.get("RUNGS_REQUIRE_GPU") is not None  # scripts/gpu-check sets it
    failures = 0
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        print(f"# sdpa_baseline: PyTorch with torch.nn.attention is not installed ({e}); nothing measured")
        return 1 if required else 0
    if not torch.cuda.is_available():
        print("# sdpa_baseline: torch sees no CUDA device; nothing measured")
        return 1 if required else 0

    runs = 10 if args.quick else 50
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    print(f"# {props.name}, torch {torch.__version__}, SDPA FLASH backend, enable_gqa=True, contiguous KV")
    if args.csv:
        print("batch,context,qo_heads,kv_heads,time_us,bytes,gb_s,note")
    else:
        print(f"{'batch':>6} {'context':>8} {'heads':>7} {'time_us':>10} {'MB moved':>12} {'GB/s':>8}  note")

    head_dim = 128
    a = torch.empty(1 << 30, device=dev, dtype=torch.bfloat16)  # 2 GiB
    b = torch.empty_like(a)
    copy_us, _ = time_calls(torch, lambda: b.copy_(a), runs)
    print(f"# device-to-device copy (torch copy_, 2 GiB): {copy_us:.1f} us, {2 * a.numel() * 2 / (copy_us * 1e3):.0f} GB/s "
          "(read + written)")
    del a, b
    torch.cuda.empty_cache()
    for batch in (1, 8, 16, 64, 256):
        for context in (512, 4096, 16384):
            for kv_heads in (8, 32):
                qo_heads = 32
                kv_bytes = 2 * batch * kv_heads * context * head_dim * 2
                free, _ = torch.cuda.mem_get_info()
                note = ""
                if kv_bytes > 0.85 * free:
                    note = "skipped: exceeds memory"
                    time_us = 0.0
                else:
                    q = torch.randn(batch, qo_heads, 1, head_dim, device=dev, dtype=torch.bfloat16)
                    k = torch.randn(batch, kv_heads, context, head_dim, device=dev, dtype=torch.bfloat16)
                    v = torch.randn_like(k)
                    try:
                        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                            fn = lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                            time_us, how = time_calls(torch, fn, runs)
                            if how:
                                note = how
                    except Exception as e:  # e.g. TypeError from a torch without enable_gqa
                        note = f"failed: {type(e).__name__}: {first_line(e)[:50]}".replace(",", ";")
                        failures += 1
                        time_us = 0.0
                    del q, k, v
                    torch.cuda.empty_cache()
                bytes_moved = kv_bytes + 2 * batch * qo_heads * head_dim * 2
                gbs = bytes_moved / (time_us * 1e3) if time_us > 0 else 0.0
                if args.csv:
                    print(f"{batch},{context},{qo_heads},{kv_heads},{time_us:.2f},{bytes_moved},{gbs:.1f},{note}")
                else:
                    print(f"{batch:6d} {context:8d} {qo_heads:4d}/{kv_heads:<2d} {time_us:10.1f} "
                          f"{bytes_moved / 1e6:12.1f} {gbs:8.0f}  {note}")
                sys.stdout.flush()
    # Prefill chunks: 2048 new tokens over 0 and 4096 cached, 32q/8kv, one sequence; the causal
    # mask aligned bottom-right (query i of n sees keys 0 .. cached + i), as rungs' prefill.
    for cached in (0, 4096):
        n, ctx = 2048, cached + 2048
        q = torch.randn(1, 32, n, head_dim, device=dev, dtype=torch.bfloat16)
        k = torch.randn(1, 8, ctx, head_dim, device=dev, dtype=torch.bfloat16)
        v = torch.randn_like(k)
        flops = 4 * head_dim * 32 * (n * cached + n * (n + 1) / 2)
        try:
            from torch.nn.attention.bias import causal_lower_right
            mask = causal_lower_right(n, ctx)
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                t, _ = time_calls(torch, lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True),
                                  runs)
            print(f"# prefill bf16 D128, 1 x 2048 over {cached} cached, 32q/8kv: sdpa, {t:.1f} us, "
                  f"{flops / (t * 1e6):.1f} TFLOPS")
        except Exception as e:
            print(f"# prefill bf16 D128, 1 x 2048 over {cached} cached, 32q/8kv: sdpa failed: "
                  f"{type(e).__name__}: {first_line(e)[:60]}")
            failures += 1
        del q, k, v
        torch.cuda.empty_cache()
    if failures:
        print(f"# sdpa_baseline: {failures} shape(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
