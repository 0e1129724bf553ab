#!/usr/bin/env python3
"""scripts/sass-check's parser, tile-loop finder, classes, checks and model arithmetic on a
recorded listing (fixtures/sass_probe_sm90.txt: `cuobjdump -sass -res-usage` 13.2 of
fixtures/sass_probe.cu built by nvcc 13.0 for sm_90), with hand-counted expectations. No nvcc
or cuobjdump needed (label host)."""
import importlib.machinery
import importlib.util
import os
import sys
import tempfile
import unittest

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
        self.assertAlmostEqual(p["fraction"], ideal / 3.015e12 / 501e-6, places=6)
        self.assertAlmostEqual(p["waves"], 1 / 16)
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


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=1)
