#!/usr/bin/env python3
"""Generate src/block_hash_table.rs: what BOLT's block hash needs to know about an instruction
beyond its LLVM opcode name (also generated here), keyed by (iced-x86 Code, operand form):

* the AT&T mnemonics LLVM's instruction printer uses (for the "loose" OpcodeHash);
* the MCInst operand list as a template over iced-x86's operands (for the InstrHash);
* iced-x86 Register -> LLVM X86 register enum number.

Usage (from the repository root):
  cargo run --release -p pcmap-perf2bolt --example block_hash_corpus -- BINARIES... > corpus.txt
  python3 crates/pcmap-perf2bolt/tools/gen-block-hash-tables.py corpus.txt \
      > crates/pcmap-perf2bolt/src/block_hash_table.rs

Every example encoding is disassembled by `llvm-mc-22 --disassemble -show-inst` twice: once
normally (register operands printed by name), once under gdb with the `MCContext` argument of
`llvm::MCOperand::print` cleared, so that LLVM prints register operands as their enum numbers.
Pairing the two outputs gives LLVM's register numbering; register names iced-x86 knows but the
examples do not use are assembled (`llvm-mc -show-inst`, same two runs) from small instructions.
Each MCInst operand is then matched against iced-x86's operands of the same example (several
examples per key narrow ambiguous matches down); operands matching nothing become constants.

Coverage is that of the corpus: instruction forms it lacks hash as unknown (their iced-x86 code name)
(counted as unknown by block_hash). The committed table was generated from the test fixtures
(p1, p4, the 2,500-function program, blockhash_mix.c builds, x87.c and x87_forms.s), zstd 1.5.7 (the zstd-sys crate's
sources; clang -O0/-O2/-O3 -march=x86-64-v3/-Os PIE, gcc -O2/-O3 -march=x86-64-v4) and Debian
12 binaries: ls, grep, tar, gdb, perl, python3.11, vim.basic, openssl, libcrypto.so.3,
libc.so.6, libm.so.6, libgmp.so.10, libmpfr.so.6, libsqlite3.so.0, liblzma.so.5,
libstdc++.so.6, libz3.so.4 and libLLVM.so.22.1.
"""
import os
import re
import subprocess
import sys
import tempfile

LLVM_MC = "/usr/lib/llvm-22/bin/llvm-mc"
TRIPLE = "-triple=x86_64-unknown-linux-gnu"
MARKER = "0xcc"
PRINT_SYM = "_ZNK4llvm9MCOperand5printERNS_11raw_ostreamEPKNS_9MCContextE"


def run_mc(text, disassemble, numbers):
    """Run llvm-mc -show-inst on `text`; with `numbers`, under gdb so registers print as numbers."""
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "in.txt")
        out = os.path.join(d, "out.s")
        with open(src, "w") as f:
            f.write(text)
        args = (["--disassemble"] if disassemble else []) + ["-show-inst", TRIPLE, src, "-o", out]
        if numbers:
            script = os.path.join(d, "g.gdb")
            with open(script, "w") as f:
                f.write("set pagination off\nset breakpoint pending on\n"
                        f"break {PRINT_SYM}\ncommands\nsilent\nset $rdx = 0\ncontinue\nend\n"
                        "run " + " ".join(args) + "\nquit\n")
            subprocess.run(["gdb", "-q", "-batch", "-x", script, LLVM_MC],
                           capture_output=True, text=True, check=True)
        else:
            subprocess.run([LLVM_MC] + args, capture_output=True, text=True)
        with open(out) as f:
            return parse_mc(f.read())


def parse_mc(out):
    """MCInsts of llvm-mc -show-inst output: [(asm text, opcode name, [(kind, value)])]."""
    insts = []
    cur = None
    for line in out.splitlines():
        m = re.search(r"# <MCInst #\d+ (\S+?)(>?)$", line)
        if m:
            text = line[:line.index("# <MCInst")].strip()
            cur = (text, m.group(1), [])
            insts.append(cur)
            if m.group(2):
                cur = None
            continue
        m = re.search(r"#  <MCOperand (\w+):(.*?)>(>?)$", line)
        if m and cur is not None:
            cur[2].append((m.group(1), m.group(2)))
            if m.group(3):
                cur = None
    return insts


def split_operands(rest):
    """Printed AT&T operands, split at top-level commas."""
    out, depth, cur = [], 0, ""
    for ch in rest:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def printed_reg_number(tok):
    m = re.fullmatch(r"%st\((\d)\)", tok)
    if m:
        return reg_numbers.get(f"ST{m.group(1)}")
    if tok == "%st":
        return reg_numbers.get("ST0")
    return reg_numbers.get(tok.lstrip("%").upper())


def mnemonic(text, name, operands):
    """What `MCInstPrinter::getMnemonic` returns, whitespace removed: the asm string up to its
    first operand reference. Prefixes printed from MCInst flags (rep, lock, ...) are not part of
    it; literal operands of the asm string (`%cl` of shifts, `%rax` of `stosq`, the `*` of
    indirect branches) are. A printed operand is literal when it names no register of the
    MCInst's operands and is not an immediate, address or memory reference built from them."""
    # A condition code is an operand embedded in the mnemonic (`cmov${cond}{l}`, `set${cond}`):
    # the mnemonic ends before it. The x87 conditional moves (`CMOVB_F`... `fcmovnbe`) spell
    # their condition out in the asm string instead, so their mnemonic is the printed one.
    for prefix, mn in (("CMOV", "cmov"), ("SETCC", "set"), ("SETZUCC", "setzu"), ("JCC", "j"),
                       ("CFCMOV", "cfcmov"), ("CMPCCXADD", "cmp"), ("CCMP", "ccmp"),
                       ("CTEST", "ctest")):
        if name.startswith(prefix) and not name.endswith("_F"):
            return mn
    words = text.replace("\t", " ").split(None, 1)
    if not words:
        return ""
    # Vector compares print their predicate as part of the mnemonic (`cmpnlesd`, `vcmpltps`,
    # `vpcmpltud`: printVecCompareInstr), getMnemonic() has the plain one (`cmpsd`).
    if re.match(r"V?CMP(PS|PD|SS|SD|PH|SH|BF16)", name):
        m = re.fullmatch(r"(v?cmp)[a-z_]*?(ps|pd|ss|sd|ph|sh|pbf16)", words[-1 if len(words) == 1 else 0])
        if m:
            return m.group(1) + m.group(2)
    if re.match(r"VPCMPU?[BWDQ]Z", name):
        m = re.fullmatch(r"(vpcmp)[a-z]*?(u?[bwdq])", words[0])
        if m:
            return m.group(1) + m.group(2)
    if not name.endswith("_PREFIX") and len(words) > 1 and words[0] in (
            "rep", "repne", "lock", "notrack", "data16", "data32", "xacquire", "xrelease"):
        words = words[1].split(None, 1)
    mn = words[0]
    if len(words) == 1:
        return mn
    regs = {int(v) for k, v in operands if k == "Reg"}
    for tok in split_operands(words[1]):
        names = re.findall(r"%[a-z0-9]+(?:\(\d\))?", tok)
        literal = (names and not tok.startswith("*") and "(" not in tok.replace("%st(", "")
                   and ":" not in tok
                   and all(printed_reg_number(n) not in regs for n in names))
        if not literal:
            return mn + ("*" if tok.startswith("*") else "")
        mn += tok + ","
    return mn


# ---------------------------------------------------------------------------------------------
corpus = [l.rstrip("\n") for l in open(sys.argv[1])]
iced_regs = []  # (index, name)
examples = []  # (code, mem, hex, atoms)
for line in corpus:
    if line.startswith("R "):
        _, idx, name = line.split()
        iced_regs.append((int(idx), name))
    elif line.startswith("E "):
        head, _, atoms = line.partition(" | ")
        _, code, mem, *hexes = head.split()
        examples.append((int(code), int(mem), " ".join(hexes), atoms.split()))
# The marker itself (int3) cannot be an example: it has no operands and prints as `int3`.
marker_keys = [(c, m) for c, m, h, _ in examples if h == MARKER]
examples = [e for e in examples if e[2] != MARKER]


def llvm_reg_name(iced):
    m = re.fullmatch(r"R(\d+)L", iced)
    if m:
        return f"R{m.group(1)}B"
    return iced


def att_name(iced):
    n = llvm_reg_name(iced).lower()
    m = re.fullmatch(r"st(\d)", n)
    if m:
        return f"st({m.group(1)})"
    return n


def reg_probe(iced):
    """A small instruction using the register (AT&T source operand), or None."""
    r = "%" + att_name(iced)
    n = llvm_reg_name(iced)
    if re.fullmatch(r"(AL|CL|DL|BL|AH|CH|DH|BH|SPL|BPL|SIL|DIL|R\d+B)", n):
        return f"movb {r}, {r}"
    if re.fullmatch(r"(AX|CX|DX|BX|SP|BP|SI|DI|R\d+W)", n):
        return f"movw {r}, {r}"
    if re.fullmatch(r"(EAX|ECX|EDX|EBX|ESP|EBP|ESI|EDI|R\d+D)", n):
        return f"movl {r}, {r}"
    if re.fullmatch(r"(RAX|RCX|RDX|RBX|RSP|RBP|RSI|RDI|R\d+)", n):
        return f"movq {r}, {r}"
    if n.startswith(("XMM", "YMM", "ZMM")):
        return f"vmovaps {r}, {r}"
    if re.fullmatch(r"K\d", n):
        return f"kmovw {r}, {r}"
    if re.fullmatch(r"MM\d", n):
        return f"movq {r}, {r}"
    if re.fullmatch(r"ST\d", n):
        return f"fld {r}"
    if n in ("ES", "CS", "SS", "DS", "FS", "GS"):
        return f"movw {r}, (%rax)"
    if re.fullmatch(r"CR\d+", n) or re.fullmatch(r"DR\d+", n):
        return f"movq {r}, %rax"
    if n == "RIP":
        return "leaq 0(%rip), %rax"
    if n == "EIP":
        return "leal 0(%eip), %eax"
    return None


def pair_regs(named, numbered, into):
    for a, b in zip(named, numbered):
        for (ka, va), (kb, vb) in zip(a[2], b[2]):
            if ka == "Reg" and kb == "Reg":
                into[va if va else "NoRegister"] = int(vb)


reg_numbers = {"NoRegister": 0}
probes = [p for p in (reg_probe(n) for _, n in iced_regs) if p]
asm = "\n".join(probes) + "\n"
pair_regs(run_mc(asm, False, False), run_mc(asm, False, True), reg_numbers)

# Examples, separated by markers (an encoding llvm-mc rejects yields no MCInst).
src = "\n".join(f"{MARKER}\n{h}" for _, _, h, _ in examples) + f"\n{MARKER}\n"
named = run_mc(src, True, False)
numbered = run_mc(src, True, True)
assert len(named) == len(numbered), (len(named), len(numbered))
pair_regs(named, numbered, reg_numbers)


def groups(insts):
    out, cur = [], None
    for i in insts:
        if i[1] == "INT3":
            if cur is not None:
                out.append(cur)
            cur = []
        else:
            cur.append(i)
    return out


gn, gm = groups(named), groups(numbered)
assert len(gn) == len(examples) == len(gm), (len(gn), len(examples))


def iced_reg_number(name):
    if name == "None":
        return 0
    return reg_numbers.get(llvm_reg_name(name))


M64 = (1 << 64) - 1


def ext(x, mode):
    if mode == "raw":
        return x & M64
    bits = int(mode[1:])
    v = x & ((1 << bits) - 1)
    if mode[0] == "s" and v >> (bits - 1):
        v -= 1 << bits
    return v & M64


MODES = ["raw", "s8", "s16", "s32", "z8", "z16", "z32"]


def candidates(kind, val, atoms):
    c = []
    if kind == "Reg":
        n = int(val)
        for a in atoms:
            k, _, v = a.partition("=")
            if k[0] == "r" and iced_reg_number(v) == n:
                c.append(f"R{k[1:]}")
            elif k in ("mb", "mi", "mg", "km") and iced_reg_number(v) == n:
                c.append(k.upper())
        c.append(f"C{n}")
    elif kind == "Imm":
        n = int(val) & M64
        for a in atoms:
            k, _, v = a.partition("=")
            if k[0] == "i":
                for mode in MODES:
                    if ext(int(v), mode) == n:
                        c.append(f"I{k[1:]}:{mode}")
            elif k in ("ms", "md") and int(v) & M64 == n:
                c.append(k.upper())
            elif k[0] == "b" and int(v) & M64 == n:
                c.append(f"B{k[1:]}")
        c.append(f"C{int(val)}")
    else:
        c.append("X")
    return c


RANK = {"R": 0, "M": 1, "K": 1, "I": 2, "B": 3, "C": 4, "X": 5}
by_key = {}
for (code, mem, h, atoms), g_named, g_num in zip(examples, gn, gm):
    if not g_named:
        continue
    main = g_num[-1]
    prefix_ok = all(not i[2] for i in g_num[:-1])
    names = " ".join(i[1] for i in g_named)
    mnems = " ".join(mnemonic(a[0], a[1], b[2]) for a, b in zip(g_named, g_num))
    cands = [candidates(k, v, atoms) for k, v in main[2]]
    e = by_key.get((code, mem))
    if e is None:
        n_ops = sum(5 if a.startswith("mb=") else 1 for a in atoms
                    if a[0] in "rib" or a.startswith("mb=") or a.startswith("km="))
        by_key[(code, mem)] = [names, mnems, cands, prefix_ok, n_ops == len(cands)]
    elif e[0] == names and len(e[2]) == len(cands):
        e[2] = [[x for x in a if x in b] for a, b in zip(e[2], cands)]
        e[3] = e[3] and prefix_ok


for key in marker_keys:
    by_key[key] = ["INT3", "int3", [], True, True]


def resolve(cands, no_ties):
    """Pick one candidate per MCInst operand. A memory reference is five operands (base, scale,
    index, displacement, segment); its registers are told apart by their neighbours."""
    out = []
    follows = {"MS": "MB", "MI": "MS", "MD": "MI", "MG": "MD"}
    for k, c in enumerate(cands):
        nxt = cands[k + 1] if k + 1 < len(cands) else []
        prev = out[-1] if out else None
        # (moffs forms have a displacement and a segment only)
        c = [x for x in c if (x not in follows or prev == follows[x]
                              or (x == "MD" and prev not in ("MB", "MS", "MD")))
             and (x != "MB" or "MS" in nxt)]
        if prev == "MD" and "MG" in c:
            out.append("MG")
        elif prev == "MS" and "MI" in c:
            out.append("MI")
        elif "MB" in c:
            out.append("MB")
        elif c:
            # Without tied operands, an iced-x86 operand appears once: prefer unused ones.
            used = set(out) if no_ties else set()
            out.append(sorted(c, key=lambda x: (RANK[x[0]], x in used, c.index(x)))[0])
        else:
            out.append(None)
    return out


def rust_op(best):
    if best is None:
        return "Op::Unknown"
    if best[0] == "R":
        return f"Op::Reg({best[1:]})"
    if best == "MB":
        return "Op::MemBase"
    if best == "MI":
        return "Op::MemIndex"
    if best == "MG":
        return "Op::MemSeg"
    if best == "KM":
        return "Op::MaskReg"
    if best == "MS":
        return "Op::MemScale"
    if best == "MD":
        return "Op::MemDisp"
    if best[0] == "I":
        i, mode = best[1:].split(":")
        return f"Op::Imm({i}, Ext::{mode.capitalize()})"
    if best[0] == "B":
        return f"Op::Branch({best[1:]})"
    if best[0] == "C":
        return f"Op::Const({best[1:]})"
    return "Op::Unknown"


print("// @generated by tools/gen-block-hash-tables.py from llvm-mc-22 -show-inst; do not edit.")
print("//! AT&T mnemonics, MCInst operand templates and LLVM register numbers for BOLT's block hash.")
print()
print("use crate::block_hash::{Ext, Op};")
print()
print("/// LLVM X86 register enum number by `iced_x86::Register as usize` (`u16::MAX`: unknown).")
print("pub static REGISTERS: &[u16] = &[")
for idx, name in sorted(iced_regs):
    n = iced_reg_number(name)
    print(f"    {n if n is not None else 65535}, // {name}")
print("];")
print()
print("/// `(iced_x86::Code as u16, operand form (`block_hash::form`), LLVM opcode names, AT&T")
print("/// mnemonics, MCInst operands)`, sorted; prefixes LLVM decodes as instructions of their own come first in the")
print("/// names and mnemonics (they have no operands); the operands are those of the last MCInst.")
print("pub static INSNS: &[(u16, u8, &str, &str, &[Op])] = &[")
for (code, mem), (names, mnems, cands, prefix_ok, no_ties) in sorted(by_key.items()):
    ops = ", ".join(rust_op(c) for c in resolve(cands, no_ties)) if prefix_ok else "Op::Unknown"
    print(f"    ({code}, {mem}, \"{names}\", \"{mnems}\", &[{ops}]),")
print("];")
