#!/usr/bin/env python3
"""scripts/sass-check's parser, tile-loop finder, classes, checks and model arithmetic on a
recorded listing (fixtures/sass_probe_sm90.txt: `cuobjdump -sass -res-usage` 13.2 of
fixtures/sass_probe.cu built by nvcc 13.0 for sm_90), with hand-counted expectations. No nvcc
or cuobjdump needed (label host)."""
import contextlib
import importlib.machinery
import importlib.util
import io
import json
import math
import os
import sys
import tempfile
import unittest
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "sass-check")
loader = importlib.machinery.SourceFileLoader("sass_check", SCRIPT)
sc = importlib.util.module_from_spec(importlib.util.spec_from_loader("sass_check", loader))
loader.exec_module(sc)

TILE = "_Z10tile_probePK6float4Pfi"
LOCAL = "_Z11local_probePfi"
PLANS = {"threads": 128, "stages": 3, "tile_tokens": {"64": 8}, "instances": [], "shapes": []}


class SassCheckTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(os.path.join(HERE, "fixtures", "sass_probe_sm90.txt")) as f:
            cls.functions = sc.parse_listing(f.read())

    def test_resources(self):
        self.assertEqual(sorted(self.functions), [(TILE, 90), (LOCAL, 90)])
        tile, local = self.functions[(TILE, 90)], self.functions[(LOCAL, 90)]
        self.assertEqual((tile.regs, tile.stack, tile.shared, tile.local), (16, 0, 3072, 0))
        self.assertEqual((local.regs, local.stack, local.shared, local.local), (32, 256, 0, 0))
        self.assertEqual(sc.static_smem(tile), 2048)  # the stage of 128 float4; SHARED adds sm_90's 1 KiB

    def test_second_copy_is_skipped(self):
        # A kernel compiled into two cubins (two translation units or binaries) is read once.
        with open(os.path.join(HERE, "fixtures", "sass_probe_sm90.txt")) as f:
            text = f.read()
        twice = sc.parse_listing(text + text)
        self.assertEqual(len(twice[(TILE, 90)].instructions), 49)
        self.assertEqual(twice[(TILE, 90)].regs, 16)

    def test_instructions(self):
        tile = self.functions[(TILE, 90)]
        # /*0000*/ .. /*0300*/, the NOP padding dropped.
        self.assertEqual(len(tile.instructions), 49)
        self.assertEqual(tile.instructions[0], (0x0, "LDC", "LDC R1, c[0x0][0x28]"))
        self.assertEqual(tile.instructions[-1], (0x300, "BRA", "BRA 0x300"))
        local = self.functions[(LOCAL, 90)]
        ops = [op for _, op, _ in local.instructions]
        self.assertEqual((ops.count("STL"), ops.count("LDL")), (64, 1))

    def test_tile_loop_and_classes(self):
        tile = self.functions[(TILE, 90)]
        # `@!P1 BRA 0x110` at 0x2a0 closes the loop; `@!P0 BRA 0x2b0` (forward) does not count.
        self.assertEqual(sc.tile_loop(tile.instructions), (0x110, 0x2A0))
        self.assertIsNone(sc.tile_loop(self.functions[(LOCAL, 90)].instructions))
        classes, lds = sc.loop_counts(tile)
        self.assertEqual(dict(classes), {
            "integer": 6,      # IADD3, LEA.HI.X.SX32, VIADD, LEA, ISETP.LE.AND, LEA.HI.X
            "uniform": 1,      # UIADD3
            "shared": 4,       # three never-executed @!PT LDS, LDS.128
            "async copy": 3,   # LDGSTS.E.BYPASS.128, LDGDEPBAR, DEPBAR.LE
            "control": 3,      # two BAR.SYNC, BRA
            "fp32": 6,         # FMUL (three, two predicated), FADD (two), FSETP
            "ffma": 1, "shuffle": 1, "mufu": 1})
        self.assertEqual(sum(classes.values()), 26)
        self.assertEqual(lds, 512)  # LDS.128: 32 lanes x 16 B; the @!PT loads never run
        # Issue (26) vs the shared-memory port: (2048 B copied + 4 warps x 512 B read) / 128 B.
        self.assertEqual(sc.tile_cycles(classes, lds, 2048, 4), 32)
        self.assertEqual(sc.tile_cycles(classes, 0, 2048, 4), 26)

    def test_opcode_classes(self):
        self.assertEqual(sc.opcode_class("FFMA"), "ffma")
        self.assertEqual(sc.opcode_class("SHFL.BFLY"), "shuffle")
        self.assertEqual(sc.opcode_class("IMAD.WIDE.U32"), "integer")
        self.assertEqual(sc.opcode_class("ULDC.64"), "uniform")
        self.assertEqual(sc.opcode_class("LDL.LU"), "local")
        self.assertEqual(sc.opcode_class("HMMA.16816.F32.BF16"), "tensor")
        self.assertEqual(sc.opcode_class("LDSM.16.MT88.4"), "shared")
        self.assertEqual(sc.opcode_class("BMMA.88128.AND.POPC"), "other")

    def test_instance_keys(self):
        k = "void rungs::attention::detail::"
        self.assertEqual(sc.instance_key(k + "paged_attention_kernel<__nv_bfloat16, 128, 0, 4, 1, true, 0u>(p)"),
                         ("decode", "bf16", 128, 4))
        self.assertEqual(sc.instance_key(k + "paged_attention_kernel<__half, 64, 0, 8, 2, true, 0u>(p)"),
                         ("decode", "fp16", 64, 16))
        self.assertEqual(sc.instance_key(k + "paged_attention_kernel<__half, 96, 0, 8, 8, false, 0u>(p)"),
                         ("prefill", "fp16", 96, 0))
        self.assertEqual(sc.instance_key(k + "cache_write_kernel<__half, 64>(p)"), ("cache_write", "fp16", 64, 0))
        self.assertIsNone(sc.instance_key(k + "paged_attention_kernel<__half, 128, 16, 4, 1, true, 0u>(p)"))  # static
        self.assertIsNone(sc.instance_key(k + "paged_attention_kernel<__half, 128, 0, 4, 1, true, 7u>(p)"))  # mods
        self.assertEqual(sc.instance_key(k + "tensor_core_decode_kernel<__nv_bfloat16, 128, 0, 8>(p)"),
                         ("decode_tc", "bf16", 128, 8))
        self.assertIsNone(sc.instance_key(k + "tensor_core_decode_kernel<__half, 128, 16, 4>(p)"))  # static
        self.assertEqual(sc.instance_key(k + "tensor_core_decode_kernel<__half, 128, 0, 4, 0u>(p)"),
                         ("decode_tc", "fp16", 128, 4))
        self.assertIsNone(sc.instance_key(k + "tensor_core_decode_kernel<__half, 128, 0, 4, 7u>(p)"))  # mods
        self.assertEqual(sc.instance_key(k + "tensor_core_decode_kernel<__half, 128, 0, 4, 0u, __half>(p)"),
                         ("decode_tc", "fp16", 128, 4))
        self.assertEqual(
            sc.instance_key(k + "tensor_core_decode_kernel<__nv_bfloat16, 128, 0, 4, 0u, __nv_fp8_e4m3>(p)"),
            ("decode_tc", "bf16/e4m3", 128, 4))
        self.assertEqual(sc.instance_key(k + "tensor_core_prefill_kernel<__half, 128, 0>(p)"),
                         ("prefill_tc", "fp16", 128, 0))
        self.assertIsNone(sc.instance_key(k + "tensor_core_prefill_kernel<__half, 64, 32>(p)"))  # static
        self.assertEqual(sc.instance_key(k + "tensor_core_prefill_kernel<__half, 128, 0, 0u, __half>(p)"),
                         ("prefill_tc", "fp16", 128, 0))
        self.assertEqual(
            sc.instance_key(k + "tensor_core_prefill_kernel<__nv_bfloat16, 128, 0, 0u, __nv_fp8_e4m3>(p)"),
            ("prefill_tc", "bf16/e4m3", 128, 0))
        self.assertIsNone(sc.instance_key(k + "tensor_core_prefill_kernel<__half, 128, 0, 1u, __half>(p)"))  # mods
        self.assertIsNone(sc.instance_key("tile_probe(float4 const*, float*, int)"))

    def test_local_memory_fails(self):
        errors, found = sc.check(self.functions, PLANS, [90])
        self.assertEqual(errors, ["local_probe(float*, int) (sm_90): local memory (0 B local, 256 B stack; LDL, STL)"])
        self.assertEqual(found, {})

    def test_budget_and_copy_width_fail(self):
        # The probe's code under a decode kernel's name: 168 registers allow 3 CTAs where the
        # launch bounds ask for 4, and an 8-byte LDGSTS in the tile loop.
        name = ("_ZN5rungs9attention6detail22paged_attention_kernelI13__nv_bfloat16Li128ELi0ELi4ELi1ELb1ELj0EEEv"
                "NS1_16attention_paramsE")
        tile = self.functions[(TILE, 90)]
        f = sc.Function(name, 90)
        f.regs, f.stack, f.shared, f.local = 168, 0, 50176, 0
        f.instructions = [(a, "LDGSTS.E.64" if op.startswith("LDGSTS") else op, t) for a, op, t in tile.instructions]
        plans = dict(PLANS, instances=[{"kind": "decode", "dtype": "bf16", "head_dim": 128, "group": 4,
                                        "ctas_per_sm": {"90": 4}}])
        errors, found = sc.check({(name, 90): f}, plans, [90])
        label = "void rungs::attention::detail::paged_attention_kernel<__nv_bfloat16, 128, 0, 4, 1, true, 0u>" \
                "(rungs::attention::detail::attention_params) (sm_90)"
        self.assertEqual(errors, [
            f"{label}: 168 registers and 49152 B of shared memory allow 3 CTAs per SM (limited by registers); "
            "its __launch_bounds__ asks for 4",
            f"{label}: the K/V tile loop copies with LDGSTS.E.64; 16-byte LDGSTS.E.BYPASS.128 (cp.async.cg 16) only"])
        self.assertEqual(list(found), [(("decode", "bf16", 128, 4), 90)])
        f.regs = 128
        f.instructions = tile.instructions
        self.assertEqual(sc.check({(name, 90): f}, plans, [90])[0], [])

    def test_tensor_core_decode_needs_hmma_and_ldsm(self):
        # The probe's tile loop (no HMMA, no LDSM) under a tensor-core decode's name fails both;
        # with an HMMA and an LDSM added to the loop body it passes.
        name = "_ZN5rungs9attention6detail25tensor_core_decode_kernelI13__nv_bfloat16Li128ELi0ELi4EEEvNS1_16attention_paramsE"
        tile = self.functions[(TILE, 90)]
        f = sc.Function(name, 90)
        f.regs, f.stack, f.shared, f.local = 128, 0, 50176, 0
        f.instructions = tile.instructions
        plans = dict(PLANS, instances=[{"kind": "decode_tc", "dtype": "bf16", "head_dim": 128, "group": 4,
                                        "ctas_per_sm": {"90": 4}}])
        label = "void rungs::attention::detail::tensor_core_decode_kernel<__nv_bfloat16, 128, 0, 4>" \
                "(rungs::attention::detail::attention_params) (sm_90)"
        errors, found = sc.check({(name, 90): f}, plans, [90])
        self.assertEqual(errors, [f"{label}: no HMMA in the K/V tile loop", f"{label}: no LDSM in the K/V tile loop"])
        self.assertEqual(list(found), [(("decode_tc", "bf16", 128, 4), 90)])
        loop = sc.tile_loop(tile.instructions)
        f.instructions = tile.instructions + [(loop[0], "HMMA.16816.F32.BF16", "HMMA.16816.F32.BF16 R4, R8, R12, R4"),
                                              (loop[0], "LDSM.16.M88.4", "LDSM.16.M88.4 R8, [R2]")]
        self.assertEqual(sc.check({(name, 90): f}, plans, [90])[0], [])

    def test_missing_instance_fails(self):
        plans = dict(PLANS, instances=[{"kind": "decode", "dtype": "bf16", "head_dim": 128, "group": 4}])
        errors, _ = sc.check(self.functions, plans, [90])
        self.assertIn("default instance decode bf16 D128 g4 has no sm_90 SASS in the binaries", errors)

    def test_latency_bound_prediction(self):
        # One CTA per SM (132 sequences, 1 KV head), 1000 tiles of 8 tokens x 64 dims x K and V
        # (2 KiB): 2 tiles (4 KiB) in flight per SM, against 3.015 TB/s / 132 x 1 us = 22841 B
        # needed, so the KV stream takes kv x 1 us / (132 x 4096 B) = 500 us; plus 1 us of
        # pipeline fill. Ideal bytes: KV 270336000 + Q and O 33792 + tables 132 x 500 x 4.
        tile = self.functions[(TILE, 90)]
        classes, lds = sc.loop_counts(tile)
        shape = {"dtype": "fp16", "head_dim": 64, "batch": 132, "context": 8000, "qo_heads": 1, "kv_heads": 1,
                 "num_splits": 1, "split_tokens": 8000, "block_size": 16}
        p = sc.predict(tile, classes, lds, shape, PLANS, sc.GPUS["H100 SXM"])
        self.assertEqual(p["bound"], "latency")
        self.assertEqual(p["ctas_per_sm"], 16)  # 2048 threads / 128
        self.assertAlmostEqual(p["in_flight_kib"], 4.0)
        ideal = 270336000 + 33792 + 264000
        self.assertAlmostEqual(p["optimistic"], ideal / 3.015e12 / 501e-6, places=6)
        # Calibrated: the same stream, plus the block table before it and the output after it,
        # 485 cycles each at 1.98 GHz, and the kernel's 1.4 us in a graph-replayed step (the issue,
        # 26 x 2.04 cycles a tile for a lone warp per SMSP, stays far below).
        self.assertAlmostEqual(p["fraction"], ideal / 3.015e12 / (501e-6 + 2 * 485 / 1.98e9 + 1.4e-6), places=6)
        self.assertAlmostEqual(p["t_issue_cal"], 1000 * 26 * 2.04 / 1.98e9)
        # Issue margin: the KV, Q, O and the KV heads' tables (132 x 500 x 4 B) at 3.015 TB/s over
        # 1000 tiles of one CTA per SM at 32 cycles each (the shared-memory port outlasts the 26
        # instructions at full issue).
        self.assertAlmostEqual(p["margin"], (270336000 + 33792 + 264000) / 3.015e12 / (1000 * 32 / 1.98e9), places=6)
        self.assertAlmostEqual(p["waves"], 1 / 16)
        # 80 tokens (2.7 MB of KV) fit the L2: hot in a benchmark's loop (memory at 90% of the
        # L2's 9 TB/s), cold (DRAM) for an instance or margin shape.
        small = dict(shape, context=80, split_tokens=80)
        hot = sc.predict(tile, classes, lds, dict(small, role="benchmark"), PLANS, sc.GPUS["H100 SXM"])
        cold = sc.predict(tile, classes, lds, dict(small, role="margin"), PLANS, sc.GPUS["H100 SXM"])
        self.assertEqual((hot["l2_resident"], cold["l2_resident"]), (True, False))
        self.assertAlmostEqual(cold["t_memory"] / hot["t_memory"], 0.9 * 9.0e12 / 3.015e12)
        self.assertAlmostEqual(p["slots_per_byte"], 4 * 26 / 2048)

    def test_element_bytes(self):
        # (query and output bytes, KV bytes) of a shape's dtype key; "bf16/e4m3": an fp8 cache.
        self.assertEqual(sc.element_bytes("bf16"), (2, 2))
        self.assertEqual(sc.element_bytes("fp16/e5m2"), (2, 1))

    def test_floors(self):
        self.assertAlmostEqual(sc.floor_of(0.995), 0.98)
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("# comment\nH100 bf16 D128 g4 decode 0.97\n")
        self.assertEqual(sc.read_floors(f.name), {("H100", ("decode", "bf16", 128, 4)): 0.97})
        with open(f.name, "w") as g:
            g.write("A100 bf16 D128 g4 decode 0.97\n")
        with self.assertRaises(SystemExit) as e:
            sc.read_floors(f.name)
        self.assertIn(":1: 'A100 bf16 D128 g4 decode 0.97': expected", str(e.exception))
        os.unlink(f.name)


# A merge kernel's listing for main(): sm_90 resources and a split loop whose body issues
# `loads` 16-byte partial loads (the unrolled loop) among 40 instructions, closed by a backward
# branch, inside an outer loop (the dims) that must not be taken for the main loop.
MERGE = "_ZN5rungs9attention6detail19merge_splits_kernelI13__nv_bfloat16Li128ELb0EEEvNS1_12merge_paramsE"
MERGE_PLANS = {"threads": 128, "stages": 3, "tile_tokens": {"128": 32},
               "instances": [{"kind": "merge", "dtype": "bf16", "head_dim": 128}], "shapes": [],
               "merge_shapes": [{"role": "instance", "after": "decode 16 x 4096, 32/8 tensor_cores", "dtype": "bf16",
                                 "head_dim": 128, "rows": 512, "num_splits": 4, "threads": 128,
                                 "grid": [128, 1, 1]}]}


def merge_listing(loads, distinct=False):
    """`loads` 16-byte loads into R8 (each waits for the last one's reader, as nvcc 13.0's sm_90
    merge does) or, distinct, into R8, R12, R16, ... (all in flight at once)."""
    body = ([f"LDG.E.128 R{8 + 4 * i if distinct else 8}, desc[UR4][R28.64]" for i in range(loads)]
            + ["FFMA R19, R27, R8, R19"] * (39 - loads))
    lines = ["S2R R13, SR_TID.X", "LDG.E R26, desc[UR4][R24.64]"] + body + ["@P4 BRA 0x20", "@!P1 BRA 0x10", "EXIT"]
    sass = "\n".join(f"        /*{16 * i:04x}*/                   {t} ;\n        /* 0x000000000000000000000000 */"
                     for i, t in enumerate(lines))
    return (f"arch = sm_90\n\nResource usage:\n Function {MERGE}:\n"
            "  REG:32 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:560 TEXTURE:0 SURFACE:0 SAMPLER:0\n\n"
            f"\tcode for sm_90\n\n\t\tFunction : {MERGE}\n{sass}\n")


class ModelTest(unittest.TestCase):
    """The merge, cache-write and prefill predictions and their floors, hand-computed."""

    def test_stream_loop_and_counts(self):
        f = sc.parse_listing(merge_listing(4))[(MERGE, 90)]
        # The inner loop (0x20 .. 0x290: 4 LDG.E.128 of 40 instructions), not the outer one
        # around it (0x10 .. 0x2a0) and not the probe's LDGSTS tile loop.
        self.assertEqual(sc.stream_loop(f.instructions), (0x20, 0x290))
        self.assertEqual(sc.stream_counts(f, "merge"), (10.0, 4.0))
        self.assertEqual(sc.stream_counts(f, "cache_write"), (20.0, 2.0))  # K and V: two loads an element
        self.assertIsNone(sc.stream_loop(self_functions()[(TILE, 90)].instructions))

    def test_merge_facts(self):
        # Four loads into one register: one in flight; into four: four. 32 registers: 16 CTAs.
        f = sc.parse_listing(merge_listing(4))[(MERGE, 90)]
        self.assertEqual(sc.merge_facts(f), {"in_flight": 1, "ctas_per_sm": 16})
        g = sc.parse_listing(merge_listing(4, distinct=True))[(MERGE, 90)]
        self.assertEqual(sc.merge_facts(g), {"in_flight": 4, "ctas_per_sm": 16})

    def test_merge_prediction(self):
        # Optimistic: 128 CTAs of 4 warps on 132 SMs (0.97 resident), each lane 4 splits' float4
        # in flight: 0.97 x 4 x 32 x 4 x 16 B = 7944 B against 22841 needed: the 1,056,768 bytes
        # read at the copy bandwidth x 7944 / 22841, plus two round trips (lse, then partials).
        # Calibrated: a warp's chain of 2 + 4 / 4 round trips of 485 cycles outlasts the bytes
        # (0.39 us), plus the kernel's 1.4 us.
        f = sc.parse_listing(merge_listing(4, distinct=True))[(MERGE, 90)]
        shape = MERGE_PLANS["merge_shapes"][0]
        p = sc.predict_stream(f, "merge", shape, sc.GPUS["H100 SXM"])
        copy = 0.9 * 3.35e12
        moved = 512 * (4 * (128 * 4 + 4) + 128 * 2)
        self.assertEqual(moved, 1187840)
        in_flight = 128 / 132 * 4 * 32 * 4 * 16
        t_opt = (moved - 512 * 256) / (copy * in_flight / (copy / 132 * 1e-6)) + 2e-6
        t = 3 * 485 / 1.98e9 + 1.4e-6
        self.assertEqual((p["bound"], p["ctas_per_sm"], p["unroll"], p["per_element"]), ("chain", 16, 4.0, 10.0))
        self.assertAlmostEqual(p["optimistic"], moved / copy / t_opt, places=9)
        self.assertAlmostEqual(p["fraction"], moved / copy / t, places=9)
        self.assertAlmostEqual(p["fraction"], 0.1845, places=4)
        # The loads into one register: one float4 in flight per lane, a quarter of the bytes in
        # flight, and a chain of 2 + 4 round trips.
        q = sc.predict_stream(sc.parse_listing(merge_listing(4))[(MERGE, 90)], "merge", shape, sc.GPUS["H100 SXM"])
        t1 = (moved - 512 * 256) / (copy * in_flight / 4 / (copy / 132 * 1e-6)) + 2e-6
        self.assertAlmostEqual(q["optimistic"], moved / copy / t1, places=9)
        self.assertAlmostEqual(q["fraction"], moved / copy / (6 * 485 / 1.98e9 + 1.4e-6), places=9)
        # Not unrolled: the same.
        r = sc.predict_stream(sc.parse_listing(merge_listing(1))[(MERGE, 90)], "merge", shape, sc.GPUS["H100 SXM"])
        self.assertAlmostEqual(r["fraction"], q["fraction"], places=12)

    def test_calibrated_merge_time(self):
        # After a decode of 32 rows x 64 splits (1 x 16384, 32/8): 2 + 64 dependent loads of 485
        # cycles (27 rows of warps fit the GPU at once), against 1 MB at the copy bandwidth.
        partial, out = 32 * 64 * (128 * 4 + 4), 32 * 128 * 2
        t = sc.calibrated_merge_time(partial, out, 32, 64, {"in_flight": 1, "ctas_per_sm": 16}, sc.H100_MEASURED)
        self.assertAlmostEqual(t, 1.4e-6 + 66 * 485 / 1.98e9)
        # 8448 rows are one round of 132 SMs x 16 CTAs x 4 warps; 8449 two.
        m = {"in_flight": 4, "ctas_per_sm": 16}
        self.assertAlmostEqual(sc.calibrated_merge_time(0, 0, 8448, 8, m, sc.H100_MEASURED), 1.4e-6 + 4 * 485 / 1.98e9)
        self.assertAlmostEqual(sc.calibrated_merge_time(0, 0, 8449, 8, m, sc.H100_MEASURED), 1.4e-6 + 8 * 485 / 1.98e9)

    def test_smsp_cpi(self):
        # A lone warp 2.04 cycles an instruction, two 1.43 (the mixed stream's rate binds), with
        # HMMA in the stream 1.74.
        self.assertEqual(sc.smsp_cpi(1), 2.04)
        self.assertEqual(sc.smsp_cpi(2), 1.43)
        self.assertEqual(sc.smsp_cpi(4, tensor=True), 1.74)
        self.assertEqual(sc.smsp_cpi(1, tensor=True), 2.04)

    def test_cache_write_prediction(self):
        # 2048 tokens x 8 heads x 16 vectors = 262144 over 1024 CTAs x 256 threads: one each, K
        # and V (32 B) in flight; 8 CTAs per SM (2048 threads) but 7.76 resident: 63550 B in
        # flight, memory-bound: K and V read and written, 8 B of slot per token, plus one latency.
        f = sc.parse_listing(merge_listing(4))[(MERGE, 90)]
        shape = {"role": "instance", "dtype": "bf16", "tokens": 2048, "kv_heads": 8, "head_dim": 128, "threads": 256,
                 "grid": [1024, 1, 1]}
        p = sc.predict_stream(f, "cache_write", shape, sc.GPUS["H100 SXM"])
        moved = 262144 * 16 * 4 + 2048 * 8
        self.assertEqual((p["bound"], p["ctas_per_sm"], p["moved"]), ("memory", 8, moved))
        self.assertAlmostEqual(p["in_flight_kib"] * 1024, 1024 / 132 * 8 * 32 * 1 * 32)
        self.assertAlmostEqual(p["fraction"], moved / 3.015e12 / (moved / 3.015e12 + 1e-6 + 1.4e-6), places=9)
        # An fp8 cache writes 1-byte elements: 262144 x 8 x 2 x (2 + 1) bytes.
        q = sc.predict_stream(f, "cache_write", dict(shape, dtype="bf16/e4m3"), sc.GPUS["H100 SXM"])
        self.assertEqual(q["moved"], 262144 * 8 * 2 * 3 + 2048 * 8)

    def test_prefill_tiles_and_schedule(self):
        # 8 new tokens over 4 cached, group 2, 4 rows per CTA: CTA j's last token is 2j + 1 and
        # sees 2j + 6 keys, in tiles of 8: 1, 1, 2, 2. Split at 8 keys: the second split of the
        # first two CTAs is empty.
        shape = {"batch": 1, "q_len": 8, "cached": 4, "qo_heads": 2, "kv_heads": 1, "rows_per_cta": 4, "q_tiles": 4,
                 "num_splits": 1, "split_tokens": 12}
        self.assertEqual(sc.prefill_cta_tiles(shape, 8), [1, 1, 2, 2])
        self.assertEqual(sc.prefill_cta_tiles(dict(shape, num_splits=2, split_tokens=8), 8), [1, 0, 1, 0, 1, 1, 1, 1])
        self.assertEqual(sc.prefill_cta_tiles(dict(shape, q_tiles=5), 8), [1, 1, 2, 2, 0])  # past the rows
        self.assertEqual(sc.prefill_cta_tiles(dict(shape, batch=2, kv_heads=2, qo_heads=4), 8), [1, 1, 2, 2] * 4)
        self.assertEqual(sc.list_schedule([3, 1, 2, 2], 2), 5)  # slots: 3 | 1, 2, 2

    def test_prefill_prediction(self):
        # The probe's tile loop as a prefill: 32 cycles a tile (the shared-memory port), 16 CTAs
        # per SM; the longest CTA's 2 tiles take 2 x 32 x 16 cycles; the roofline is memory's
        # (7172 ideal bytes: KV 12 x 64 x 2 x 2, Q and O 2 x 8 x 2 x 64 x 2, one table entry).
        tile = self_functions()[(TILE, 90)]
        classes, lds = sc.loop_counts(tile)
        shape = {"dtype": "fp16", "head_dim": 64, "batch": 1, "q_len": 8, "cached": 4, "qo_heads": 2, "kv_heads": 1,
                 "block_size": 16, "rows_per_cta": 4, "q_tiles": 4, "num_splits": 1, "split_tokens": 12,
                 "kernel": "simt"}
        p = sc.predict_prefill(tile, classes, lds, shape, PLANS, sc.GPUS["H100 SXM"])
        t_opt = 2 * 32 * 16 / 1.98e9 + 1e-6
        # Calibrated: 26 instructions at 1.43 cycles each (37.2; 16 warps per SMSP, no HMMA)
        # outlast the port's 32; plus the kernel's 1.4 us.
        t = 2 * 26 * 1.43 * 16 / 1.98e9 + 1e-6 + 1.4e-6
        self.assertEqual((p["bound"], p["roof"], p["ctas"], p["flops"]), ("issue", "memory", 4, 4 * 64 * 2 * (32 + 36)))
        self.assertAlmostEqual(p["time"], t)
        self.assertAlmostEqual(p["fraction"], 7172 / 3.015e12 / t, places=12)
        self.assertAlmostEqual(p["optimistic"], 7172 / 3.015e12 / t_opt, places=12)
        self.assertAlmostEqual(p["rereads"], 6 * 2048 / 3072)
        # Built for 32 CTAs per SM where only 16 fit: each CTA issues at 1/32 of its SM.
        plans = dict(PLANS, instances=[{"kind": "prefill", "dtype": "fp16", "head_dim": 64, "ctas_per_sm": {"90": 32}}])
        r = sc.predict_prefill(tile, classes, lds, shape, plans, sc.GPUS["H100 SXM"])
        self.assertAlmostEqual(r["time"], 2 * 26 * 1.43 * 32 / 1.98e9 + 1e-6 + 1.4e-6)
        # On tensor cores the same time against the tensor peak: the roofline is still memory's.
        q = sc.predict_prefill(tile, classes, lds, dict(shape, kernel="tensor_cores"), PLANS, sc.GPUS["H100 SXM"])
        self.assertAlmostEqual(q["fraction"], p["fraction"])
        self.assertEqual(q["peak"], 989.4e12)

    def test_published_comparison(self):
        # vLLM v1 at batch 1 (64 CTAs on 108 SMs: one warp per SMSP): 1024 / 16 = 64 blocks, 16
        # per warp; 2 x 2 x 16 + 2 = 66 round trips of 385 cycles, 16 x (325 + 507) + 832 = 14144
        # instructions at 1.55 cycles, at 1.41 GHz, plus 4 us.
        t1 = (66 * 385 + 14144 * 1.55) / 1.41e9 + 4e-6
        self.assertAlmostEqual(sc.legacy_decode_time("v1", 1, sc.A100_PCIE, 1.55, 385), t1)
        # Batch 4: 256 CTAs, 3 on the busiest SM (4 fit: 126 registers), sharing its issue.
        t4 = (66 * 385 + 3 * 14144 * 1.55) / 1.41e9 + 4e-6
        self.assertAlmostEqual(sc.legacy_decode_time("v1", 4, sc.A100_PCIE, 1.55, 385), t4)
        # v2 at batch 4: 512 CTAs of 512-token partitions (8 blocks per warp: 34 round trips, 8 x
        # 831 + 889 instructions), 5 on the busiest SM: a wave of 4, then 1; and its reduce kernel.
        w = (34 * 385 + 4 * 7537 * 1.55) + (34 * 385 + 7537 * 1.55)
        self.assertAlmostEqual(sc.legacy_decode_time("v2", 4, sc.A100_PCIE, 1.55, 385),
                               w / 1.41e9 + 4e-6 + 4e-6 + 3 * 385 / 1.41e9)
        # Calibrated (cpi None): each wave at smsp_cpi of its warps per SMSP, 485-cycle round
        # trips: batch 1 a lone warp (2.04), v2's second wave of batch 4 too, its first 4 (1.43).
        self.assertAlmostEqual(sc.legacy_decode_time("v1", 1, sc.A100_PCIE, None, 485),
                               (66 * 485 + 14144 * 2.04) / 1.41e9 + 4e-6)
        w = (34 * 485 + 4 * 7537 * 1.43) + (34 * 485 + 7537 * 2.04)
        self.assertAlmostEqual(sc.legacy_decode_time("v2", 4, sc.A100_PCIE, None, 485),
                               w / 1.41e9 + 4e-6 + 4e-6 + 3 * 485 / 1.41e9)
        # Every published timing compared within 1.3x by the calibrated model (all four rows
        # held out since the constants are the H100's).
        self.assertEqual({r["role"] for r, _, _ in sc.published_comparison()}, {"check"})
        for row, opt, cal in sc.published_comparison():
            self.assertLess(max(cal / row["measured"], row["measured"] / cal), 1.3, row)
            self.assertLessEqual(opt, cal)

    def test_margin_floors(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("H200 bf16 D128 g4 decode margin 64x4096 1.05\nH200 bf16 D128 g4 decode_tc margin 1x16384 2.10\n")
        key = ("decode", "bf16", 128, 4)
        floors = sc.read_floors(f.name)
        self.assertEqual(floors, {("H200", key, "64x4096"): 1.05, ("H200", ("decode_tc", "bf16", 128, 4), "1x16384"): 2.10})
        self.assertEqual(sc.margin_line("H200", key, "64x4096", 1.0649), "H200 bf16 D128 g4 decode margin 64x4096 1.05\n")
        # A margin below its floor fails; H100's margins have no floors; a missing floor fails.
        margins = {("H200", key, "64x4096"): 1.04, ("H100", key, "64x4096"): 0.5,
                   ("H200", ("decode_tc", "bf16", 128, 4), "1x16384"): 2.2, ("H200", key, "8x4096"): 3.0}
        self.assertEqual(sc.floor_errors({}, floors, "f.txt", margins), [
            "H200 decode bf16 D128 g4 at 64x4096: issue margin 1.040, below its floor 1.05",
            "H200 decode bf16 D128 g4 at 8x4096: no issue-margin floor recorded in f.txt"])
        with open(f.name, "w") as g:
            g.write("H200 bf16 D128 g4 decode margin 2x4096 1.0\n")
        with self.assertRaises(SystemExit) as e:
            sc.read_floors(f.name)
        self.assertIn("the margin shapes are 64x4096, 8x4096, 1x16384", str(e.exception))
        os.unlink(f.name)

    def test_hmma_cost_matches_the_peak(self):
        # 132 SMs x 4 SMSPs x 1.98 GHz x 4096 FLOPs / cycles = the datasheet's 989.4 TFLOPS.
        self.assertAlmostEqual(132 * 4 * 1.98e9 * 4096 / sc.HMMA_CYCLES / 989.4e12, 1.0)
        self.assertAlmostEqual(sc.HMMA_CYCLES, 4.3280, places=4)

    def test_floor_lines(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("H100 bf16 D128 g4 decode 0.97\nH200 bf16/e4m3 D128 prefill 0.22\nH100 fp16 D64 merge 0.05\n")
        self.assertEqual(sc.read_floors(f.name), {("H100", ("decode", "bf16", 128, 4)): 0.97,
                                                  ("H200", ("prefill", "bf16/e4m3", 128, 0)): 0.22,
                                                  ("H100", ("merge", "fp16", 64, 0)): 0.05})
        for bad in ("H100 bf16 D128 g4 prefill 0.3", "H100 bf16 D128 decode 0.3", "H100 bf16 D128 merge x"):
            with open(f.name, "w") as g:
                g.write(bad + "\n")
            with self.assertRaises(SystemExit) as e:
                sc.read_floors(f.name)
            self.assertIn(f":1: '{bad}': expected", str(e.exception))
        os.unlink(f.name)
        self.assertEqual(sc.floor_line("H100", ("prefill_tc", "bf16", 128, 0), 0.2345), "H100 bf16 D128 prefill_tc 0.22\n")
        self.assertEqual(sc.floor_line("H200", ("decode_tc", "bf16", 128, 8), 1.0), "H200 bf16 D128 g8 decode_tc 0.99\n")

    def test_a_lowered_prediction_fails_its_floor(self):
        # main() end to end on a recorded-style listing: the merge with 4 loads in flight passes
        # its floors (0.17 and 0.12); the same loop loading into one register (one in flight, a
        # chain of 6 round trips instead of 3) predicts less and fails, naming instance,
        # prediction and floor.
        d = tempfile.mkdtemp()
        plans, floors, listing = (os.path.join(d, n) for n in ("plans.json", "floors.txt", "listing.txt"))
        with open(plans, "w") as f:
            json.dump(MERGE_PLANS, f)
        with open(floors, "w") as f:
            f.write("H100 bf16 D128 merge 0.17\nH200 bf16 D128 merge 0.12\n")
        for distinct, status in ((True, 0), (False, 1)):
            with open(listing, "w") as f:
                f.write(merge_listing(4, distinct))
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                self.assertEqual(sc.main(["--plans", plans, "--floors", floors, "--arch", "90", "--listing", listing]),
                                 status)
            if status:
                self.assertIn("H100 merge bf16 D128: predicted 0.137 of copy bandwidth, below its floor 0.17",
                              out.getvalue())
                self.assertIn("failures: 2", out.getvalue())
        # No merge shape in --plans: the instance has no prediction, which fails too.
        with open(plans, "w") as f:
            json.dump(dict(MERGE_PLANS, merge_shapes=[]), f)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(sc.main(["--plans", plans, "--floors", floors, "--arch", "90", "--listing", listing]), 1)
        self.assertIn("default instance merge bf16 D128: no prediction", out.getvalue())


class H100Test(unittest.TestCase):
    """The calibrated model against the H100's measurements (benchmarks/gpu/2026-11-27-h100:
    the raw files, and sass.json, the SASS of the kernels it ran)."""

    @classmethod
    def setUpClass(cls):
        cls.sass = sc.load_h100_sass()
        cls.rows = sc.h100_comparison()

    def row(self, label, source="gpu-check/paged_attention_bench.csv"):
        found = [r for r in self.rows if r[0]["label"] == label and r[0]["source"] == source]
        self.assertEqual(len(found), 1, label)
        return found[0]

    def test_reading_the_measurements(self):
        ceiling, rows, comments = sc.read_bench_csv(os.path.join(sc.H100_RUN, "gpu-check", "paged_attention_bench.csv"))
        self.assertEqual((ceiling, len(rows)), (2994e9, 30))
        self.assertEqual((rows[0]["batch"], rows[0]["splits"], rows[0]["time_us"]), ("1", "2", "12.01"))
        # 30 bench rows, 5 later lines of the same run (SIMT and tensor-core at 32/8 and 64/8,
        # the dynamic instance), 2 prefill chunks, 8 single decode cases and 2 prefill chunks of
        # scripts/gpu-profile: every graph-replayed time of a kernel sass.json records.
        self.assertEqual(len(self.rows), 47)
        self.assertEqual(sorted({c["kernel"] for c, _, _, _ in self.rows}),
                         ["decode g1", "decode g4", "decode g8", "decode_tc g4", "decode_tc g8", "prefill_tc"])
        self.assertEqual(sc.even_split_tokens(16384, 64, 32), 256)
        self.assertEqual(sc.even_split_tokens(4096, 4, 32), 1024)
        self.assertEqual(sc.even_split_tokens(512, 2, 32), 256)
        with self.assertRaises(SystemExit):
            sc.even_split_tokens(512, 3, 32)  # at least 256 tokens a split: 2 splits, not 3

    def test_memory_bound_row_by_hand(self):
        # SIMT g4 at 64 x 4096, 32/8: memory-bound. Bytes: K and V (64 x 4096 x 8 heads x 128 x
        # 2 x 2 B), Q and O (2 x 64 x 32 x 128 x 2 B), each KV head's block table (64 x 8 x 256 x
        # 4 B) at the measured 2994 GB/s; plus the first tile's 1 us, 2 round trips of 485
        # cycles and the kernel's 1.4 us.
        case, opt, cal, use = self.row("64 x 4096, 32/8")
        moved = 64 * 4096 * 8 * 128 * 4 + 2 * 64 * 32 * 128 * 2 + 64 * 8 * 256 * 4
        self.assertAlmostEqual(cal, moved / 2994e9 + 1e-6 + 2 * 485 / 1.98e9 + 1.4e-6, places=12)
        self.assertAlmostEqual(case["measured"], 371.52e-6)
        self.assertEqual(use, "held out")

    def test_merge_chain_row_by_hand(self):
        # SIMT g4 at 1 x 16384, 32/8, 64 splits of 256 tokens (8 tiles): 512 CTAs, 4 on the
        # busiest SM. KV (67 MB) exceeds the L2: memory-bound on the KV, Q, O, tables and the
        # partial outputs (32 rows x 64 splits x 516 B) at 2994 GB/s; then the merge: 1.4 us and
        # a warp's 2 + 64 dependent loads of 485 cycles.
        case, opt, cal, use = self.row("1 x 16384, 32/8")
        moved = 16384 * 8 * 128 * 4 + 2 * 32 * 128 * 2 + 8 * 1024 * 4 + 32 * 64 * 516
        k = self.sass["kernels"]["decode g4"]
        issue = 4 * 8 * sc.tile_cycles(Counter(k["classes"]), k["lds"], 16384, 4, 1.43) / 1.98e9
        self.assertLess(issue, moved / 2994e9)
        decode = moved / 2994e9 + 1e-6 + 2 * 485 / 1.98e9 + 1.4e-6
        self.assertAlmostEqual(cal, decode + 1.4e-6 + 66 * 485 / 1.98e9, places=12)

    def test_issue_bound_row_by_hand(self):
        # SIMT g8 at 64 x 4096, 64/8: 252 registers, 2 CTAs per SM; 512 CTAs, 4 on the busiest SM
        # in 2 waves of 2 warps per SMSP at 1.43 cycles, 128 tiles of 1337 instructions.
        case, opt, cal, use = self.row("64 x 4096, 64/8", "gpu-profile/time-simt-g8-64x4096.csv")
        self.assertEqual(self.sass["kernels"]["decode g8"]["loop_instructions"], 1337)
        self.assertAlmostEqual(cal, 2 * 2 * 128 * 1337 * 1.43 / 1.98e9 + 1e-6 + 2 * 485 / 1.98e9 + 1.4e-6, places=12)

    def test_every_row_within_1_3x(self):
        # The issue's bar for the calibrated model: within 1.3x of every measured time compared,
        # none excluded; the fit rows are the three small decodes H100_FIT_TIMES names.
        for case, opt, cal, use in self.rows:
            ratio = case["measured"] / cal
            self.assertLess(max(ratio, 1 / ratio), 1.3, (case["label"], case["source"], ratio))
        fit = sorted(c["label"] for c, _, _, use in self.rows if use == "fit")
        self.assertEqual(fit, sorted(sc.H100_FIT_TIMES))
        for case, opt, cal, use in self.rows:
            if use == "fit":
                self.assertLess(abs(math.log(case["measured"] / cal)), 0.06, case["label"])

    def test_instructions_and_issue(self):
        rows = sc.h100_counters()
        self.assertEqual(len(rows), 12)  # 10 cases; two merges
        for case, kernel, m, low, high, cpi, per_smsp, fit in rows:
            # Every instruction Nsight Compute counted is the loop's (warps x passes x loop) plus
            # at most the code outside the loop once.
            self.assertLessEqual(low, m["instructions"], (case, kernel))
            self.assertLessEqual(m["instructions"], high, (case, kernel))
            if fit:  # ISSUE_CPI and ISSUE_CPI_TENSOR are 1 / these issue-active fractions
                self.assertAlmostEqual(100 / m["issue_active_pct"], cpi, delta=0.01)
        # SIMT g4 at 64 x 4096: 2048 warps x 128 tiles x 820 instructions.
        g4 = next(r for r in rows if r[0] == "simt-g4-64x4096")
        self.assertEqual(g4[3], 2048 * 128 * 820)
        self.assertEqual(sorted((r[0], r[1]) for r in rows if r[7]), sorted(sc.H100_FIT_COUNTERS))


def self_functions():
    with open(os.path.join(HERE, "fixtures", "sass_probe_sm90.txt")) as f:
        return sc.parse_listing(f.read())


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=1)
