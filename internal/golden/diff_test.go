package golden

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	tests := []struct {
		name, a, b, want string
	}{
		{"equal", "x\ny\n", "x\ny\n", ""},
		{"one line changed", "a\nb\nc\n", "a\nB\nc\n",
			"--- want\n+++ got\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"},
		{"added at the end", "a\n", "a\nb\n",
			"--- want\n+++ got\n@@ -1 +1,2 @@\n a\n+b\n"},
		{"into empty", "", "a\n",
			"--- want\n+++ got\n@@ -0,0 +1 @@\n+a\n"},
		{"missing final newline", "a\nb\n", "a\nb",
			"--- want\n+++ got\n@@ -1,2 +1,2 @@\n a\n-b\n+b\n\\ No newline at end of file\n"},
		{"far apart changes make two hunks",
			"1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", "x\n2\n3\n4\n5\n6\n7\n8\n9\ny\n",
			"--- want\n+++ got\n@@ -1,4 +1,4 @@\n-1\n+x\n 2\n 3\n 4\n@@ -7,4 +7,4 @@\n 7\n 8\n 9\n-10\n+y\n"},
		{"close changes share a hunk",
			"1\n2\n3\n4\n5\n6\n7\n8\n", "x\n2\n3\n4\n5\n6\n7\ny\n",
			"--- want\n+++ got\n@@ -1,8 +1,8 @@\n-1\n+x\n 2\n 3\n 4\n 5\n 6\n 7\n-8\n+y\n"},
		{"deleted in the middle", "a\nb\nc\nd\ne\nf\ng\nh\n", "a\nb\nc\nd\nf\ng\nh\n",
			"--- want\n+++ got\n@@ -2,7 +2,6 @@\n b\n c\n d\n-e\n f\n g\n h\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Diff("want", "got", tc.a, tc.b); got != tc.want {
				t.Errorf("Diff =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// TestDiffApplies: for random texts, applying the diff's hunks to a gives b,
// and every hunk's context and removed lines are a's.
func TestDiffApplies(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	text := func() string {
		var b strings.Builder
		for range rng.IntN(30) {
			b.WriteString(strconv.Itoa(rng.IntN(5)) + "\n")
		}
		if rng.IntN(5) == 0 {
			b.WriteString("tail")
		}
		return b.String()
	}
	for i := range 2000 {
		a, b := text(), text()
		d := Diff("a", "b", a, b)
		if (d == "") != (a == b) {
			t.Fatalf("case %d: Diff %q for %q vs %q", i, d, a, b)
		}
		if d == "" {
			continue
		}
		got, err := apply(a, d)
		if err != nil || got != b {
			t.Fatalf("case %d: applying\n%s\nto %q: %q, %v; want %q", i, d, a, got, err, b)
		}
	}
}

// TestDiffLarge: past the LCS table's bound the middle is replaced whole and
// the diff still applies.
func TestDiffLarge(t *testing.T) {
	var a, b strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&a, "a%d\n", i)
		fmt.Fprintf(&b, "b%d\n", i)
	}
	d := Diff("a", "b", a.String(), b.String())
	if got, err := apply(a.String(), d); err != nil || got != b.String() {
		t.Fatalf("large diff does not apply: %v", err)
	}
}

// apply is a minimal patch(1) for Diff's output.
func apply(a, d string) (string, error) {
	as := lines(a)
	var out []string
	next := 0 // next line of a not yet copied
	dl := lines(d)[2:]
	for k := 0; k < len(dl); k++ {
		l := dl[k]
		if !strings.HasPrefix(l, "@@ -") {
			return "", fmt.Errorf("line %q: want a hunk header", l)
		}
		f := strings.Fields(l)
		start, _, _ := strings.Cut(strings.TrimPrefix(f[1], "-"), ",")
		s, err := strconv.Atoi(start)
		if err != nil {
			return "", err
		}
		if strings.HasSuffix(f[1], ",0") {
			s++ // an empty range names the line before it
		}
		for ; next < s-1; next++ {
			out = append(out, as[next])
		}
		for k+1 < len(dl) && !strings.HasPrefix(dl[k+1], "@@ ") {
			k++
			l := dl[k]
			body := l[1:]
			if k+1 < len(dl) && dl[k+1] == "\\ No newline at end of file\n" {
				body = strings.TrimSuffix(body, "\n")
				k++
			}
			switch l[0] {
			case ' ', '-':
				if next >= len(as) || as[next] != body {
					return "", fmt.Errorf("line %d of a is not %q", next+1, body)
				}
				if l[0] == ' ' {
					out = append(out, body)
				}
				next++
			case '+':
				out = append(out, body)
			default:
				return "", fmt.Errorf("bad line %q", l)
			}
		}
	}
	out = append(out, as[next:]...)
	return strings.Join(out, ""), nil
}
