package golden

import (
	"fmt"
	"strings"
)

// context is the number of unchanged lines shown around each change.
const context = 3

// maxCells bounds the LCS table; past it the differing middle is shown as
// removed and added whole.
const maxCells = 1 << 22

// op is one line of an edit script: ' ' kept, '-' only in a, '+' only in b.
type op struct {
	kind byte
	line string
	ai   int // index of the line in a (for ' ' and '-') or of the next a line
	bi   int // index of the line in b (for ' ' and '+') or of the next b line
}

// Diff returns a unified diff of b against a (labelled aName and bName),
// with three lines of context; "" when they are equal. A last line without
// a newline is marked the way diff(1) marks it.
func Diff(aName, bName, a, b string) string {
	if a == b {
		return ""
	}
	as, bs := lines(a), lines(b)
	ops := script(as, bs)
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", aName, bName)
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		// A hunk: from context lines before the first change to context
		// lines after the last change that is no more than 2*context
		// unchanged lines from the next.
		start := max(i-context, 0)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*context {
				end = min(end+context, len(ops))
				break
			}
			end = run
		}
		writeHunk(&out, ops[start:end])
		i = end
	}
	return out.String()
}

func writeHunk(out *strings.Builder, h []op) {
	var na, nb int
	for _, o := range h {
		if o.kind != '+' {
			na++
		}
		if o.kind != '-' {
			nb++
		}
	}
	fmt.Fprintf(out, "@@ -%s +%s @@\n", span(h[0].ai, na), span(h[0].bi, nb))
	for _, o := range h {
		out.WriteByte(o.kind)
		out.WriteString(o.line)
		if !strings.HasSuffix(o.line, "\n") {
			out.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

// span is a hunk range: 1-based start and length, diff(1)'s way (a length
// of 1 is left out; an empty range starts at the line before it).
func span(start, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

// lines splits s after each newline; the last line may lack one.
func lines(s string) []string {
	ls := strings.SplitAfter(s, "\n")
	if ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	return ls
}

// script is an edit script from a to b: the common prefix and suffix kept,
// the middle by longest common subsequence.
func script(a, b []string) []op {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var ops []op
	for i := 0; i < pre; i++ {
		ops = append(ops, op{' ', a[i], i, i})
	}
	ops = append(ops, middle(a[pre:len(a)-suf], b[pre:len(b)-suf], pre, pre)...)
	for k := suf; k > 0; k-- {
		i, j := len(a)-k, len(b)-k
		ops = append(ops, op{' ', a[i], i, j})
	}
	return ops
}

// middle diffs a and b (which start at line ai0 and bi0 of the whole texts)
// with an LCS table.
func middle(a, b []string, ai0, bi0 int) []op {
	n, m := len(a), len(b)
	var ops []op
	if n*m > maxCells {
		for i, l := range a {
			ops = append(ops, op{'-', l, ai0 + i, bi0})
		}
		for j, l := range b {
			ops = append(ops, op{'+', l, ai0 + n, bi0 + j})
		}
		return ops
	}
	// lcs[i][j] is the LCS length of a[i:] and b[j:].
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			ops = append(ops, op{' ', a[i], ai0 + i, bi0 + j})
			i, j = i+1, j+1
		case j == m || (i < n && lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, op{'-', a[i], ai0 + i, bi0 + j})
			i++
		default:
			ops = append(ops, op{'+', b[j], ai0 + i, bi0 + j})
			j++
		}
	}
	return ops
}
