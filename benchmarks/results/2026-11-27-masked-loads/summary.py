"""Per run: kernels whose code changed, geometric mean of old/new medians, summed times, the lowest and highest.
usage: python benchmarks/results/2026-11-27-masked-loads/summary.py FILE..."""
import math, re, sys
for path in sys.argv[1:]:
    rs = []
    for line in open(path):
        m = re.search(r"old\s+([\d.]+)us new\s+([\d.]+)us old/new ([\d.]+)", line)
        if m:
            rs.append((float(m.group(3)), float(m.group(1)), float(m.group(2)), " ".join(line.split()[:2])))
    gm = math.exp(sum(math.log(r[0]) for r in rs) / len(rs))
    rs.sort()
    print(f"{path}: {len(rs)} changed, geomean old/new {gm:.3f}, total {sum(r[1] for r in rs)/1e3:.2f} -> "
          f"{sum(r[2] for r in rs)/1e3:.2f} ms; lowest {rs[:3]}; highest {rs[-2:]}")
