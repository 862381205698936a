# tools/sass_opcounts.py: opcode counts of one kernel in cuobjdump -sass text, and of its
# longest backward-branch loop.  usage: sass_count.py FILE.sass KERNEL
# Used by tools/hip_codebook_ab.sh (docs/BENCHMARKS.md, session 10 (hip)). Needs only python3.
import re, sys, collections
text = open(sys.argv[1]).read()
name = sys.argv[2]
blocks = re.split(r"\n\s*Function : ", text)
body = next((b for b in blocks if b.startswith(name + "\n") or b.split("\n")[0].strip() == name), None)
if body is None:
    print(name, "not found"); sys.exit(0)
ins = []
for line in body.split("\n"):
    m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
    if m:
        addr = int(m.group(1), 16)
        t = m.group(2).strip()
        t = re.sub(r"^@!?U?P\w+\s+", "", t)
        ins.append((addr, t))
op = lambda t: t.split()[0]
print(name, "total", len(ins), dict(collections.Counter(op(t) for _, t in ins).most_common()))
# loops: BRA to an earlier address
best = None
for a, t in ins:
    if op(t).startswith("BRA"):
        m = re.search(r"0x([0-9a-f]+)", t)
        if m and int(m.group(1), 16) < a:
            lo = int(m.group(1), 16)
            n = sum(1 for b, _ in ins if lo <= b <= a)
            if best is None or n > best[0]:
                best = (n, lo, a)
if best:
    n, lo, hi = best
    loop = [t for b, t in ins if lo <= b <= hi]
    c = collections.Counter(op(t) for t in loop)
    imadc = sum(1 for t in loop if re.match(r"IMAD\.U32 R\d+, RZ, RZ, UR", t) or re.match(r"MOV R\d+, UR", t))
    print(" loop", hex(lo), hex(hi), "instructions", n, "table copies (IMAD.U32/MOV from UR)", imadc, dict(c.most_common()))
