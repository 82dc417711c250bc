package main

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// printFlags writes fs's flags as Go's flag.PrintDefaults lays them out,
// each spelled --name: the one flag style of aoctl's help texts (the
// command line takes -name too, the help shows one spelling).
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		var b strings.Builder
		b.WriteString("  --" + f.Name)
		name, usage := flag.UnquoteUsage(f)
		if t, ok := f.Value.(interface{ Type() string }); ok && name == "value" {
			name = t.Type()
		}
		if name != "" {
			b.WriteString(" " + name)
		}
		b.WriteString("\n    \t")
		b.WriteString(strings.ReplaceAll(usage, "\n", "\n    \t"))
		if !zeroDefault(f) {
			if isString(f.Value) {
				fmt.Fprintf(&b, " (default %q)", f.DefValue)
			} else {
				fmt.Fprintf(&b, " (default %v)", f.DefValue)
			}
		}
		fmt.Fprintln(w, b.String())
	})
}

// zeroDefault reports whether f's default is its type's zero value, which
// the help leaves unsaid (as flag.PrintDefaults does).
func zeroDefault(f *flag.Flag) bool {
	t := reflect.TypeOf(f.Value)
	var z reflect.Value
	if t.Kind() == reflect.Pointer {
		z = reflect.New(t.Elem())
	} else {
		z = reflect.Zero(t)
	}
	v, ok := z.Interface().(flag.Value)
	if !ok {
		return false
	}
	defer func() { _ = recover() }() // a String that needs its pointer set
	return f.DefValue == v.String()
}

// isString reports whether v is a string flag (its default is quoted).
func isString(v flag.Value) bool {
	g, ok := v.(flag.Getter)
	if !ok {
		return false
	}
	_, s := g.Get().(string)
	return s
}
