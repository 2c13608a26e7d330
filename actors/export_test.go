package actors

import "context"

// CommitPracticeResetOnly commits a practice reset and stops before its
// sweep, as a crash right after the commit would.
func (s *System) CommitPracticeResetOnly(ctx context.Context, p Principal) error {
	e, err := s.env(p.OwnerID, EnvTest)
	if err != nil {
		return err
	}
	e.resetMu.Lock()
	defer e.resetMu.Unlock()
	_, _, err = s.fenceAndCommitReset(ctx, e, p.OwnerID)
	return err
}
