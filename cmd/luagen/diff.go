package main

import (
	"fmt"
	"strings"
)

// diffContext is the number of unchanged lines shown around each change.
const diffContext = 3

// unifiedDiff returns the unified diff that turns a into b, with the file
// names aName and bName on its "---" and "+++" lines, or "" when a and b are
// equal. Lines are compared byte for byte, line endings included; a last
// line without a newline is marked "\ No newline at end of file" as diff(1)
// and git do.
func unifiedDiff(aName, bName string, a, b []byte) string {
	if string(a) == string(b) {
		return ""
	}
	al, bl := splitLines(string(a)), splitLines(string(b))
	delA, insB := diffLines(al, bl)

	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", aName, bName)
	for _, h := range hunks(delA, insB) {
		writeHunk(&out, h, al, bl, delA, insB)
	}
	return out.String()
}

// splitLines splits s after every newline; the last line may lack one.
func splitLines(s string) []string {
	var lines []string
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			lines = append(lines, s)
			break
		}
		lines = append(lines, s[:i+1])
		s = s[i+1:]
	}
	return lines
}

// diffLines computes a shortest edit script between a and b with Myers'
// O((N+M)D) algorithm in its linear-space form: delA[i] is true when a[i]
// is deleted and insB[j] when b[j] is inserted; every other line is kept.
func diffLines(a, b []string) (delA, insB []bool) {
	// Compare small integers rather than strings.
	ids := map[string]int{}
	code := func(lines []string) []int {
		out := make([]int, len(lines))
		for i, l := range lines {
			id, ok := ids[l]
			if !ok {
				id = len(ids)
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	d := &differ{a: code(a), b: code(b), delA: make([]bool, len(a)), insB: make([]bool, len(b))}
	size := len(a) + len(b) + 3
	d.vf, d.vb = make([]int, 2*size+1), make([]int, 2*size+1)
	d.compare(0, len(a), 0, len(b))
	return d.delA, d.insB
}

type differ struct {
	a, b       []int
	delA, insB []bool
	vf, vb     []int // furthest reaching x per diagonal, forward and backward
}

// compare marks the edits that turn a[x0:x1] into b[y0:y1].
func (d *differ) compare(x0, x1, y0, y1 int) {
	for x0 < x1 && y0 < y1 && d.a[x0] == d.b[y0] {
		x0, y0 = x0+1, y0+1
	}
	for x0 < x1 && y0 < y1 && d.a[x1-1] == d.b[y1-1] {
		x1, y1 = x1-1, y1-1
	}
	switch {
	case x0 == x1:
		for y := y0; y < y1; y++ {
			d.insB[y] = true
		}
	case y0 == y1:
		for x := x0; x < x1; x++ {
			d.delA[x] = true
		}
	default:
		// Both sides are non-empty and differ at both ends, so the edit
		// distance is at least 2 and the split point lies strictly inside.
		x, y := d.split(x0, x1, y0, y1)
		d.compare(x0, x, y0, y)
		d.compare(x, x1, y, y1)
	}
}

// split finds the middle snake of a[x0:x1] and b[y0:y1] and returns a point
// on a shortest edit path that is at least one edit away from either end.
func (d *differ) split(x0, x1, y0, y1 int) (int, int) {
	a, b := d.a[x0:x1], d.b[y0:y1]
	n, m := len(a), len(b)
	delta := n - m
	odd := delta&1 != 0
	off := (len(d.vf) - 1) / 2 // index of diagonal 0
	vf, vb := d.vf, d.vb
	// Forward: vf[off+k] is the furthest x on diagonal k = x-y.
	// Backward, in reversed coordinates x' = n-x, y' = m-y: vb[off+c] is the
	// furthest x' on diagonal c = x'-y', which is forward diagonal delta-c.
	vf[off+1], vb[off+1] = 0, 0
	for e := 0; e <= (n+m+1)/2; e++ {
		for k := -e; k <= e; k += 2 {
			var x int
			if k == -e || (k != e && vf[off+k-1] < vf[off+k+1]) {
				x = vf[off+k+1]
			} else {
				x = vf[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			vf[off+k] = x
			if c := delta - k; odd && c >= -(e-1) && c <= e-1 && x+vb[off+c] >= n {
				return x0 + x, y0 + y // e edits from the start, e-1 from the end
			}
		}
		for c := -e; c <= e; c += 2 {
			var x int
			if c == -e || (c != e && vb[off+c-1] < vb[off+c+1]) {
				x = vb[off+c+1]
			} else {
				x = vb[off+c-1] + 1
			}
			y := x - c
			for x < n && y < m && a[n-x-1] == b[m-y-1] {
				x, y = x+1, y+1
			}
			vb[off+c] = x
			if k := delta - c; !odd && k >= -e && k <= e && x+vf[off+k] >= n {
				return x0 + n - x, y0 + m - y // e edits from either end
			}
		}
	}
	panic("diff: no middle snake") // unreachable: the paths always meet
}

// hunk is a range of a and b shown together: a[a0:a1] and b[b0:b1].
type hunk struct{ a0, a1, b0, b1 int }

// hunks groups the edits into hunks with diffContext lines of context,
// merging changes whose context would touch or overlap.
func hunks(delA, insB []bool) []hunk {
	var out []hunk
	i, j := 0, 0
	for i < len(delA) || j < len(insB) {
		if i < len(delA) && delA[i] || j < len(insB) && insB[j] {
			// Start of a change at (i, j).
			s := hunk{a0: max(i-diffContext, 0), b0: max(j-diffContext, 0)}
			if n := len(out); n > 0 && s.a0 <= out[n-1].a1 {
				s = out[n-1] // extend the previous hunk
				out = out[:n-1]
			}
			for i < len(delA) && delA[i] {
				i++
			}
			for j < len(insB) && insB[j] {
				j++
			}
			s.a1 = min(i+diffContext, len(delA))
			s.b1 = min(j+diffContext, len(insB))
			out = append(out, s)
			continue
		}
		i, j = i+1, j+1 // an unchanged line
	}
	return out
}

// writeHunk prints one hunk: its @@ line and its lines in order, each run of
// deletions before the insertions that replace it.
func writeHunk(w *strings.Builder, h hunk, al, bl []string, delA, insB []bool) {
	fmt.Fprintf(w, "@@ -%s +%s @@\n", hunkRange(h.a0, h.a1), hunkRange(h.b0, h.b1))
	i, j := h.a0, h.b0
	for i < h.a1 || j < h.b1 {
		switch {
		case i < h.a1 && delA[i]:
			writeLine(w, '-', al[i])
			i++
		case j < h.b1 && insB[j]:
			writeLine(w, '+', bl[j])
			j++
		default:
			writeLine(w, ' ', al[i])
			i, j = i+1, j+1
		}
	}
}

// hunkRange formats a 0-based half-open range as "start,count", 1-based, as
// diff -u does: the count is left out when it is 1, and an empty range
// names the line before it.
func hunkRange(lo, hi int) string {
	switch n := hi - lo; n {
	case 0:
		return fmt.Sprintf("%d,0", lo)
	case 1:
		return fmt.Sprintf("%d", lo+1)
	default:
		return fmt.Sprintf("%d,%d", lo+1, n)
	}
}

func writeLine(w *strings.Builder, prefix byte, line string) {
	w.WriteByte(prefix)
	w.WriteString(line)
	if !strings.HasSuffix(line, "\n") {
		w.WriteString("\n\\ No newline at end of file\n")
	}
}
