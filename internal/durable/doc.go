// Package durable is aokeyd's one record layer: every file aokeyd reads or
// writes in its state directory or the BIRD keys directory (the
// revocation records, the ownership and migration records, the
// fingerprint key, BIRD's key include files) goes through it.
//
// Invariants:
//   - Write replaces a file so that, once it returns, the new content
//     survives a crash: a fresh temporary file (O_EXCL|O_NOFOLLOW, never
//     something planted), fsynced, renamed over the file, the directory
//     fsynced.
//   - Open and Read take regular files only: O_NOFOLLOW (a symlink is
//     refused, never read through), O_NONBLOCK (a FIFO opens at once and
//     is refused without being read, instead of blocking the caller until
//     a writer comes), and an fstat of the opened file; Read caps the size
//     (a file larger than the caller's cap is refused unread).
//   - A Record keeps PATH.bak beside PATH, written after it by every Save;
//     at Load a primary that is missing, not a regular file, too large or
//     corrupt is set aside (PATH.corrupt) and restored from a good backup,
//     and Load reports which copy it used. Without a good copy Load fails:
//     it never invents an empty record.
//   - CheckDir refuses, at start, a directory that is a symlink, is owned
//     by another user than root or the effective user, or that group or
//     others may write: whoever may write it may plant a record or a key
//     line. Group- and world-readable is allowed (BIRD's group reads the
//     include files). The error names the directory, its mode and the fix.
//   - No error of this package holds a file's content: they name paths,
//     kinds, sizes and modes.
package durable
