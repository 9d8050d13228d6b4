"""benchmarks/code_lines.py's reading of callgrind's per-instruction output."""

from __future__ import annotations

from benchmarks.code_lines import overfull_sets, parse, per_call

# Two objects; relative addresses (+N/-N, * for the same one); a call whose
# inclusive cost line must not count; a name given once and then referred to
# by its number alone.
HEADER = """\
positions: instr line
events: Ir I1mr
"""


def _out(calls: int) -> list[str]:
    body = f"""\
ob=(1) /lib/libone.so
fn=(1) f
0x1000 1 {calls} 1
+4 * {calls}
+60 * {calls} 1
cob=(2) /lib/libtwo.so
cfn=(2) g
calls={calls} 0x2000
+4 * {calls * 100} {calls * 7}
ob=(2)
fn=(2)
0x2000 3 {2 * calls}
-64 * {calls}
0x2100 3 1
"""
    return (HEADER + body).splitlines(True)


def test_lines_instructions_and_misses_per_call():
    rows = per_call(parse(_out(0)), parse(_out(1000)), 1000)
    # libone: 0x1000 and 0x1004 share line 0x40, 0x1040 is the next line; the
    # call's inclusive line (at 0x1044) adds nothing.
    assert rows["libone.so"] == (2, 3.0, 0.0)
    # libtwo: 0x2000 and 0x1fc0 (-64) are two lines; 0x2100 runs once in
    # both runs, so not per call.
    assert rows["libtwo.so"] == (2, 3.0, 0.0)


def test_misses_follow_their_line():
    text = HEADER + "ob=(1) /x/a.so\nfn=(1) f\n0x40 1 {n} {m}\n+1 * {n}\n"
    before = parse(text.format(n=5, m=5).splitlines(True))
    after = parse(text.format(n=2005, m=1005).splitlines(True))
    assert per_call(before, after, 1000) == {"a.so": (1, 4.0, 1.0)}


def test_the_position_columns_come_from_the_header():
    """Without --dump-line the costs follow the address directly."""
    text = "positions: instr\nevents: Ir I1mr\nob=(1) /x/b.so\nfn=(1) f\n0x80 {n} {m}\n"
    before = parse(text.format(n=0, m=0).splitlines(True))
    after = parse(text.format(n=3000, m=1000).splitlines(True))
    assert per_call(before, after, 1000) == {"b.so": (1, 3.0, 1.0)}


def test_sets_holding_more_lines_than_ways():
    """Lines 64 apart share a set: nine of them in set 1 overfill an 8-way set, the
    two lines of set 2 do not, and a line that runs once in both runs is not counted."""
    body = "".join(f"0x{(1 + 64 * i) * 64:x} {{n}} {{m}}\n" for i in range(9))
    body += "0x80 {n} 0\n0xc0 {n} 0\n0x1080 1 1\n"
    text = "positions: instr\nevents: Ir I1mr\nob=(1) /x/c.so\nfn=(1) f\n" + body
    before = parse(text.format(n=0, m=0).splitlines(True))
    after = parse(text.format(n=1000, m=2000).splitlines(True))
    full = overfull_sets(before, after, 1000)
    assert list(full) == [1]
    assert full[1] == [("c.so", 1 + 64 * i, 2.0) for i in range(9)]
    assert overfull_sets(before, after, 1000, ways=9) == {}
