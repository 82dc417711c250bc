package keystore

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

var (
	yamlLineRE     = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	yamlNotFoundRE = regexp.MustCompile(`^field (\S+) not found in type (.*)$`)
	yamlDupKeyRE   = regexp.MustCompile(`^mapping key ".*" already defined at line \d+$`)
)

// YAMLErrors turns an error from decoding file with yaml.v3 into one
// positioned FieldError per message it carries ("line 3: field foo not
// found in type config.Log"): the line it names, and the message wrapped in
// ErrUnknownField (a field the target type lacks, with KnownFields),
// ErrDuplicate (a mapping key given twice) or ErrSyntax (anything else).
// types renders the decoder's Go type names ("config.Log") as the names
// the operator knows ("log"); nil leaves them as they are.
//
// A custom yaml.Unmarshaler may prefix its own "line N: " to the message;
// the innermost line wins.
func YAMLErrors(file string, err error, types *strings.Replacer) FieldErrors {
	if types == nil {
		types = strings.NewReplacer()
	}
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	out := make(FieldErrors, 0, len(msgs))
	for _, m := range msgs {
		pos := Pos{File: file}
		for range 2 {
			m = strings.TrimPrefix(m, "yaml: ")
			sm := yamlLineRE.FindStringSubmatch(m)
			if sm == nil {
				break
			}
			pos.Line, _ = strconv.Atoi(sm[1])
			m = sm[2]
		}
		m = strings.TrimPrefix(m, "yaml: ")
		var err error
		switch sm := yamlNotFoundRE.FindStringSubmatch(m); {
		case sm != nil:
			err = fmt.Errorf("%w %q in %s", ErrUnknownField, sm[1], types.Replace(sm[2]))
		case yamlDupKeyRE.MatchString(m):
			err = fmt.Errorf("%w: %s", ErrDuplicate, m)
		default:
			err = fmt.Errorf("%w: %s", ErrSyntax, types.Replace(m))
		}
		out = append(out, &FieldError{Pos: pos, Err: err})
	}
	return out
}
