package main

import (
	"errors"
	"fmt"
	"os/user"
	"strconv"

	"github.com/aokeyd/aokeyd/internal/config"
)

// birdReadGID is the group that reads BIRD's include files
// (speaker.bird.group): the named group's id; unset, Debian's bird group
// when it exists (BIRD's package creates it), else 0 (root's alone).
// A named group that does not exist is an error naming the setting.
func birdReadGID(b *config.Bird) (int, error) {
	name := b.Group
	if name == "" {
		g, err := user.LookupGroup(config.DefaultBirdGroup)
		if err != nil {
			return 0, nil
		}
		return strconv.Atoi(g.Gid)
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		var unknown user.UnknownGroupError
		if errors.As(err, &unknown) {
			return 0, fmt.Errorf("speaker.bird.group: no group %q on this host: name the group BIRD runs as (bird -g), or leave it unset", name)
		}
		return 0, fmt.Errorf("speaker.bird.group: %w", err)
	}
	return strconv.Atoi(g.Gid)
}
