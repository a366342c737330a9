package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

func TestUnifiedDiff(t *testing.T) {
	tests := []struct {
		name, a, b, want string
	}{
		{name: "equal", a: "x\ny\n", b: "x\ny\n", want: ""},
		{name: "both empty", a: "", b: "", want: ""},
		{
			name: "new file",
			a:    "", b: "a\nb\n",
			want: "--- a\n+++ b\n@@ -0,0 +1,2 @@\n+a\n+b\n",
		},
		{
			name: "deleted file",
			a:    "a\n", b: "",
			want: "--- a\n+++ b\n@@ -1 +0,0 @@\n-a\n",
		},
		{
			name: "one line changed in the middle",
			a:    "1\n2\n3\n4\n5\n6\n7\n8\n9\n",
			b:    "1\n2\n3\n4\nfive\n6\n7\n8\n9\n",
			want: "--- a\n+++ b\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n",
		},
		{
			name: "insertion at the start",
			a:    "b\nc\nd\ne\nf\n",
			b:    "a\nb\nc\nd\ne\nf\n",
			want: "--- a\n+++ b\n@@ -1,3 +1,4 @@\n+a\n b\n c\n d\n",
		},
		{
			name: "appended line",
			a:    "1\n2\n3\n4\n",
			b:    "1\n2\n3\n4\n5\n",
			want: "--- a\n+++ b\n@@ -2,3 +2,4 @@\n 2\n 3\n 4\n+5\n",
		},
		{
			name: "changes 7 lines apart make two hunks",
			a:    "a\n1\n2\n3\n4\n5\n6\n7\nb\n",
			b:    "A\n1\n2\n3\n4\n5\n6\n7\nB\n",
			want: "--- a\n+++ b\n@@ -1,4 +1,4 @@\n-a\n+A\n 1\n 2\n 3\n@@ -6,4 +6,4 @@\n 5\n 6\n 7\n-b\n+B\n",
		},
		{
			name: "changes 6 lines apart make one hunk",
			a:    "a\n1\n2\n3\n4\n5\n6\nb\n",
			b:    "A\n1\n2\n3\n4\n5\n6\nB\n",
			want: "--- a\n+++ b\n@@ -1,8 +1,8 @@\n-a\n+A\n 1\n 2\n 3\n 4\n 5\n 6\n-b\n+B\n",
		},
		{
			name: "missing newline at the end",
			a:    "x\ny",
			b:    "x\ny\n",
			want: "--- a\n+++ b\n@@ -1,2 +1,2 @@\n x\n-y\n\\ No newline at end of file\n+y\n",
		},
		{
			name: "CRLF differs from LF",
			a:    "x\r\n",
			b:    "x\n",
			want: "--- a\n+++ b\n@@ -1 +1 @@\n-x\r\n+x\n",
		},
		{
			name: "replacement block",
			a:    "keep\nold1\nold2\nkeep2\n",
			b:    "keep\nnew1\nnew2\nnew3\nkeep2\n",
			want: "--- a\n+++ b\n@@ -1,4 +1,5 @@\n keep\n-old1\n-old2\n+new1\n+new2\n+new3\n keep2\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := unifiedDiff("a", "b", []byte(tt.a), []byte(tt.b))
			if got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

// applyDiff applies a unified diff made by unifiedDiff to a.
func applyDiff(t *testing.T, a, diff string) string {
	t.Helper()
	if diff == "" {
		return a
	}
	al := splitLines(a)
	lines := strings.SplitAfter(diff, "\n")
	var out strings.Builder
	next := 0 // next line of a to copy
	for i := 2; i < len(lines) && lines[i] != ""; {
		var aStart, aLen, bStart, bLen int
		h := strings.TrimSuffix(lines[i], "\n")
		if _, err := fmt.Sscanf(rangeForm(h), "@@ -%d,%d +%d,%d @@", &aStart, &aLen, &bStart, &bLen); err != nil {
			t.Fatalf("bad hunk header %q: %v", h, err)
		}
		if aLen > 0 {
			aStart-- // to 0-based
		}
		for ; next < aStart; next++ {
			out.WriteString(al[next])
		}
		i++
		for i < len(lines) && lines[i] != "" && !strings.HasPrefix(lines[i], "@@") {
			op, l := lines[i][0], lines[i][1:]
			i++
			if i < len(lines) && lines[i] == "\\ No newline at end of file\n" {
				l = strings.TrimSuffix(l, "\n")
				i++
			}
			switch op {
			case ' ', '-':
				if next >= len(al) || al[next] != l {
					t.Fatalf("line %q of the diff does not match a's line %d", l, next+1)
				}
				if op == ' ' {
					out.WriteString(l)
				}
				next++
			case '+':
				out.WriteString(l)
			default:
				t.Fatalf("bad diff line %q", lines[i-1])
			}
		}
	}
	for ; next < len(al); next++ {
		out.WriteString(al[next])
	}
	return out.String()
}

// rangeForm adds the ",1" counts that hunk headers leave out.
func rangeForm(h string) string {
	f := strings.Fields(h) // @@ -a[,n] +b[,m] @@
	for i := 1; i <= 2; i++ {
		if !strings.Contains(f[i], ",") {
			f[i] += ",1"
		}
	}
	return strings.Join(f, " ")
}

// lcsLen is the length of the longest common subsequence, by dynamic
// programming: the reference for the edit script's minimality.
func lcsLen(a, b []string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for i := range a {
		for j := range b {
			if a[i] == b[j] {
				cur[j+1] = prev[j] + 1
			} else {
				cur[j+1] = max(prev[j+1], cur[j])
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func randomText(r *rand.Rand, n, alphabet int) string {
	var b strings.Builder
	for range n {
		b.WriteString(strconv.Itoa(r.IntN(alphabet)))
		b.WriteByte('\n')
	}
	if n > 0 && r.IntN(4) == 0 {
		return strings.TrimSuffix(b.String(), "\n") // no final newline
	}
	return b.String()
}

// TestDiffRandom checks on random texts that the diff applies to a giving
// b and that its edit script is a shortest one.
func TestDiffRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		a := randomText(r, r.IntN(30), 1+r.IntN(6))
		b := randomText(r, r.IntN(30), 1+r.IntN(6))
		if r.IntN(3) == 0 { // b as an edit of a
			lines := splitLines(a)
			for k := range lines {
				if r.IntN(5) == 0 {
					lines[k] = "x\n"
				}
			}
			b = strings.Join(lines, "")
		}
		d := unifiedDiff("a", "b", []byte(a), []byte(b))
		if got := applyDiff(t, a, d); got != b {
			t.Fatalf("case %d: applying the diff gives\n%q\nwant\n%q\ndiff:\n%s", i, got, b, d)
		}
		al, bl := splitLines(a), splitLines(b)
		delA, insB := diffLines(al, bl)
		edits := count(delA) + count(insB)
		if want := len(al) + len(bl) - 2*lcsLen(al, bl); edits != want {
			t.Fatalf("case %d: %d edits, want %d\na=%q\nb=%q", i, edits, want, a, b)
		}
	}
}

func count(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// largeDiffInputs returns three files of 5000 lines: a; b, a with one
// line in 500 changed; c, different from a on every line.
func largeDiffInputs() (a, b, c string) {
	var ab, bb, cb strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&ab, "line %d\n", i)
		if i%500 == 7 {
			fmt.Fprintf(&bb, "changed %d\n", i)
		} else {
			fmt.Fprintf(&bb, "line %d\n", i)
		}
		fmt.Fprintf(&cb, "other %d\n", i)
	}
	return ab.String(), bb.String(), cb.String()
}

// TestDiffLarge checks that files of thousands of lines diff right, both
// nearly equal and entirely different; BenchmarkDiffLarge measures how
// fast.
func TestDiffLarge(t *testing.T) {
	a, b, c := largeDiffInputs()
	d := unifiedDiff("a", "b", []byte(a), []byte(b))
	if got := strings.Count(d, "\n@@ "); got != 10 { // one hunk per change
		t.Errorf("%d hunks, want 10", got)
	}
	if got := applyDiff(t, a, d); got != b {
		t.Error("nearly equal: the diff does not apply")
	}
	d = unifiedDiff("a", "c", []byte(a), []byte(c))
	if got := applyDiff(t, a, d); got != c {
		t.Error("all different: the diff does not apply")
	}
}

// BenchmarkDiffLarge diffs TestDiffLarge's files of 5000 lines, nearly
// equal and entirely different: the speed target the test once bounded
// by 5s of wall clock (about 170ms per op on a loaded 2-core machine).
func BenchmarkDiffLarge(b *testing.B) {
	x, y, z := largeDiffInputs()
	for b.Loop() {
		unifiedDiff("a", "b", []byte(x), []byte(y))
		unifiedDiff("a", "c", []byte(x), []byte(z))
	}
}
