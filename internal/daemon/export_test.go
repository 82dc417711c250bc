package daemon

// MaxRecordBytes is the largest revocations record (or backup) read.
const MaxRecordBytes = maxRecordBytes
