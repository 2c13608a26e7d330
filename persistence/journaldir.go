package persistence

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// journalDirKey in the meta bucket is the absolute path of the journal
// directory the data file was last opened with, when that was not the
// default place beside it (Path+".journal"); without the key, the journal
// was beside it.
var journalDirKey = []byte("journal_dir")

// storeIDKey in the meta bucket is the data file's identity, and the file
// storeIDName in its journal directory names the data file the journal
// belongs to. Open refuses a journal directory without it (or with
// another identity): a journal disk that did not mount, or a journal
// directory removed, leaves an empty directory that would otherwise pass
// for a fresh journal, and the changes in the real one would be lost.
var storeIDKey = []byte("store_id")

const storeIDName = "STORE_ID"

func newStoreID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// readStoreID returns the identity recorded in journal directory dir, ""
// when there is none.
func readStoreID(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, storeIDName))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("journal directory %s: %w", dir, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// writeStoreID records id in journal directory dir, durably (written
// aside, synced, renamed, directory synced) before the data file records
// it: a crash in between leaves an identity the data file does not have
// yet, which the next open replaces.
func writeStoreID(dir, id string) error {
	tmp := filepath.Join(dir, storeIDName+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(id + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, storeIDName))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("journal directory %s: recording the data file's identity: %w", dir, err)
	}
	return nil
}

// checkStoreID refuses journal directory dir unless it names the data
// file's identity id (set: the data file has opened a journal before).
// A directory without one is accepted only when the journal just moved
// there (checkJournalMove passed: nothing is left behind).
func checkStoreID(dataPath, dir, id string, moved bool) error {
	got, err := readStoreID(dir)
	if err != nil {
		return fmt.Errorf("persistence: %w", err)
	}
	switch {
	case got == id:
		return nil
	case got != "":
		return fmt.Errorf("persistence: journal directory %s belongs to another data file (its %s file names %s; %s is %s); point the journal directory at this data file's journal",
			dir, storeIDName, got, dataPath, id)
	case moved:
		return nil
	}
	return fmt.Errorf("persistence: journal directory %s is not the journal of %s (it has no %s file naming %s): is its disk mounted, or was it removed? Changes acknowledged but not yet folded into the data file are only there. Point the journal directory at it; if it is lost for good, and those changes with it, write %s into %s to start a new journal",
		dir, dataPath, storeIDName, id, id, filepath.Join(dir, storeIDName))
}

// absDir is dir made absolute and clean, so that two spellings of one
// directory compare equal.
func absDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("journal directory %s: %w", dir, err)
	}
	return abs, nil
}

// sameDir reports whether a and b (absolute) name one directory: the same
// path, or, when both exist, the same directory reached another way (a
// symbolic link, a bind mount).
func sameDir(a, b string) bool {
	if a == b {
		return true
	}
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// checkJournalMove decides whether the journal may open in dir when the data
// file at dataPath was last opened with its journal in prev (both
// absolute, not the same directory) and has folded every record up to
// applied. storeID is the data file's identity ("" when none was ever
// recorded), and cleanStop says that the last Close folded every record.
//
//   - prev still holds records after applied: acknowledged changes that
//     exist only there. Refused, naming prev: start once with it (the
//     records are then folded) or move its files.
//   - prev cannot vouch for itself: it is missing, or it is not the data
//     file's journal (no STORE_ID naming it: an empty mount point, a disk
//     that did not mount), the files did not move to dir (dir does not
//     name the data file either), and the last stop was not clean.
//     Acknowledged changes may be only in the real prev. Refused.
//   - dir holds records after applied while prev still exists: dir is not
//     this data file's journal (a copy, or another store's). Refused.
//   - Otherwise the move is safe: prev is folded, or its files were moved
//     to dir, whose records must then continue from applied (openWAL
//     checks that, as for any journal), or nothing was left to fold.
func checkJournalMove(dataPath, prev, dir string, applied uint64, storeID string, cleanStop bool) error {
	inPrev, prevExists, err := recordsAfter(prev, applied)
	if err != nil {
		return fmt.Errorf("persistence: the journal of %s was last in %s, which cannot be read (%w); set the journal directory back to %s, or repair it",
			dataPath, prev, err, prev)
	}
	if inPrev > 0 {
		return fmt.Errorf("persistence: the journal of %s is in %s and holds %d records not yet folded into it; set the journal directory back to %s (they are folded at that start, after which the journal may move), or move the files of %s into %s",
			dataPath, prev, inPrev, prev, prev, dir)
	}
	if storeID != "" && !cleanStop {
		prevID, err := readStoreID(prev)
		if err != nil {
			return fmt.Errorf("persistence: the journal of %s was last in %s, which cannot be read (%w); set the journal directory back to %s, or repair it",
				dataPath, prev, err, prev)
		}
		dirID, err := readStoreID(dir)
		if err != nil {
			return fmt.Errorf("persistence: %w", err)
		}
		if prevID != storeID && dirID != storeID {
			state := "is missing"
			if prevExists {
				state = "is not its journal (it has no " + storeIDName + " file naming " + storeID + ")"
			}
			return fmt.Errorf("persistence: the journal of %s was last in %s, which %s: is its disk mounted? The service did not stop cleanly, so changes it acknowledged may be only in that journal. Set the journal directory back to %s (journal_dir, -journal-dir or GUARD_JOURNAL_DIR) once it is there again; the journal may move after that start. Nothing was changed",
				dataPath, prev, state, prev)
		}
	}
	if !prevExists {
		return nil
	}
	inDir, _, err := recordsAfter(dir, applied)
	if err != nil {
		return fmt.Errorf("persistence: journal directory %s: %w", dir, err)
	}
	if inDir > 0 {
		return fmt.Errorf("persistence: journal directory %s holds %d records after the last one %s has folded, but the journal of %s is %s: %s is not its journal (a copy, or another data file's); empty it or choose another directory",
			dir, inDir, dataPath, dataPath, prev, dir)
	}
	return nil
}

// checkFreshJournal refuses a journal directory of its own for a new data
// file when the directory already holds records: they are another data
// file's, and replaying them here would take them from it. (A journal
// beside its data file is replayed into a new file as always: that is how
// a lost data file is rebuilt from a journal that starts at the first
// record.)
func checkFreshJournal(dataPath, dir, beside string) error {
	n, _, err := recordsAfter(dir, 0)
	if err != nil {
		return fmt.Errorf("persistence: journal directory %s: %w", dir, err)
	}
	if n > 0 {
		return fmt.Errorf("persistence: journal directory %s holds %d records, but the data file %s is new: they belong to another data file; choose an empty directory (to rebuild a lost data file from its journal, move the journal's files into %s and start without a journal directory)",
			dir, n, dataPath, beside)
	}
	return nil
}

// recordsAfter counts, reading only, the records after applied in the
// journal segments of dir, and says whether dir exists. A segment cut off
// in the middle of a frame ends there: that is the batch whose fdatasync
// never returned. Damage that intact records follow is an error.
func recordsAfter(dir string, applied uint64) (n int, exists bool, err error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	for _, e := range entries {
		first, ok, err := segmentFirst(e)
		if err != nil {
			return 0, true, err
		}
		if !ok {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			return 0, true, err
		}
		frames, end, perr := parseSegment(data, first)
		if perr != nil && intactAfter(data[end:], first-1+uint64(len(frames))) {
			return 0, true, &segmentDamage{path: path, offset: end, err: perr}
		}
		for _, f := range frames {
			if f.lsn > applied {
				n++
			}
		}
	}
	return n, true, nil
}
