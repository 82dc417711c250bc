package keystore

// A key source's values never reach an error, a status warning or a log
// line: a secret pasted into the wrong field (send_id, peers, vrf, ...)
// would go with them, to the read group that sees status and to the log.
// A problem with a value names where it is (FieldError: the source, the
// line or the key and item, the field) and what the field wants; its
// reason is always one of the constant refusals below.

// refusal is why a key source's value is refused: what the field wants. It
// wraps ErrInvalid without repeating its text.
type refusal struct{ want string }

func (e *refusal) Error() string { return e.want }
func (e *refusal) Unwrap() error { return ErrInvalid }

// refuse is the one way the key-source decoders (file and Vault alike)
// refuse a value. want must be a string literal, never text built from
// the input: TestRefusalsAreLiterals checks every call, and
// FuzzFieldValueNotEchoed checks the decoders' problems end to end.
func refuse(want string) error { return &refusal{want} }
