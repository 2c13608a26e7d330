package console

// QuickHash hashes with tiny argon2id parameters, so tests that sign in
// many times stay fast; VerifyPassword reads the parameters from the hash.
func QuickHash(pw string) string { return hashWith(pw, 64, 1, 1) }
