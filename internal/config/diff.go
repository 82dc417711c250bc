package config

import (
	"reflect"
	"slices"
	"strings"
)

// Changed names each setting whose value differs between a and b, by its
// path in aokeyd.yaml ("key_source.file.path", "log.level"), in the
// file's order. A section present in one and absent in the other is
// named as the section ("fleet", "speaker.frr").
func Changed(a, b *Config) []string {
	var out []string
	diff(reflect.ValueOf(*a), reflect.ValueOf(*b), "", &out)
	return out
}

// ReloadApplies are the settings a reload (SIGHUP) applies to the running
// daemon: the policy (its file is read again) and the log level. Every
// other setting takes effect on restart.
var ReloadApplies = []string{"policy.path", "policy.jitter_seed", "log.level"}

// NeedRestart is Changed without what a reload applies: the settings that
// keep their running value until aokeyd restarts.
func NeedRestart(running, next *Config) []string {
	return slices.DeleteFunc(Changed(running, next), func(s string) bool { return slices.Contains(ReloadApplies, s) })
}

func diff(a, b reflect.Value, path string, out *[]string) {
	switch a.Kind() {
	case reflect.Pointer:
		switch {
		case a.IsNil() && b.IsNil():
		case a.IsNil() || b.IsNil():
			*out = append(*out, path)
		default:
			diff(a.Elem(), b.Elem(), path, out)
		}
	case reflect.Struct:
		t := a.Type()
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			if name == "-" || !t.Field(i).IsExported() {
				continue
			}
			if name == "" {
				name = strings.ToLower(t.Field(i).Name)
			}
			p := name
			if path != "" {
				p = path + "." + name
			}
			diff(a.Field(i), b.Field(i), p, out)
		}
	default:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*out = append(*out, path)
		}
	}
}
