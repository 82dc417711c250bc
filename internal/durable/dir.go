package durable

import (
	"fmt"
	"os"
	"syscall"
)

// CheckDir refuses a directory aokeyd keeps records or key files in that
// someone else could write, and so plant a record, a backup or a key line
// in: dir must be a directory, not a symlink to one, owned by root or the
// effective user, and neither group- nor world-writable. Read and search
// permission for others is allowed (BIRD's group reads the include files:
// 0750). The error names dir, what is wrong and the command that fixes it.
func CheckDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, _ := os.Readlink(dir)
		return fmt.Errorf("directory %s is a symlink (to %q): aokeyd does not follow it; configure the directory it points to", dir, target)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is %s, not a directory", dir, kind(fi.Mode()))
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("directory %s is owned by uid %d, neither root nor aokeyd's user (uid %d), who could plant files in it: "+
			"chown %d %s", dir, st.Uid, os.Geteuid(), os.Geteuid(), dir)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		// The fix keeps what the owner has and what the group may
		// read, and takes writing from the group and everything from
		// others: 0777 becomes 0750.
		return fmt.Errorf("directory %s has mode %04o: group or others may write it, and so plant files aokeyd reads "+
			"(or that BIRD loads as keys): chmod %04o %s", dir, perm, perm&^0o027|0o700, dir)
	}
	return nil
}
