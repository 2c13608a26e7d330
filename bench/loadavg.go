package bench

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// Other work on the machine skews every number of a run, so the report
// shows how busy the whole machine was next to what this process used.

// loadAverage is the system's 1-minute load average as the kernel prints
// it, or "" where there is no /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// machineCPU is the CPU time all cores spent busy (everything but idle and
// I/O wait) since boot, or 0 where there is no /proc/stat.
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for i, s := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0
		}
		busy += v
	}
	// USER_HZ is 100 on every Linux this runs on.
	return time.Duration(busy) * 10 * time.Millisecond
}

// cpuWindow reads the CPU counters as a measured window opens and closes.
type cpuWindow struct {
	load           string
	process, total [2]time.Duration
}

// mark reads the counters; open says which end of the window this is.
func (w *cpuWindow) mark(open bool) {
	i := 1
	if open {
		i, w.load = 0, loadAverage()
	}
	w.process[i], w.total[i] = processCPU(), machineCPU()
}

// fill puts the window's CPU figures into p, whose Seconds and Requests
// are already set.
func (w *cpuWindow) fill(p *PhaseReport) {
	p.LoadAverage = w.load
	if p.Seconds <= 0 {
		return
	}
	if used := w.process[1] - w.process[0]; w.process[1] > 0 {
		p.ProcessCPU = 100 * used.Seconds() / p.Seconds
		if p.Requests > 0 {
			p.CPUPerRequest = float64(used.Microseconds()) / float64(p.Requests)
		}
	}
	if w.total[1] > 0 {
		p.MachineCPU = 100 * (w.total[1] - w.total[0]).Seconds() / p.Seconds
	}
}
