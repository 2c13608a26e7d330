package bench

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentpay/guard/internal/cputime"
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

// machineTimes is the CPU time of all cores since boot, split into what
// the machine's own processes and kernel used and what the hypervisor took
// (steal: a virtual core was ready to run but the host ran something
// else): the part of a shared machine's slow stretch that is the host
// taking the cores outright.
type machineTimes struct {
	busy, steal time.Duration
}

// machineCPU reads /proc/stat; zero where there is none.
func machineCPU() machineTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	t, _ := parseCPULine(line)
	return t
}

// parseCPULine reads the aggregate "cpu" line of /proc/stat: user, nice,
// system, idle, iowait, irq, softirq, steal, guest, guest_nice, in clock
// ticks. Busy is user, nice, system, irq and softirq; idle and I/O wait are
// not work, and guest time is already counted in user. Kernels before
// 2.6.11 print no steal field: it reads as 0.
func parseCPULine(line string) (machineTimes, bool) {
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return machineTimes{}, false
	}
	var v [8]int64
	for i := range v {
		if i+1 >= len(f) {
			break
		}
		n, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return machineTimes{}, false
		}
		v[i] = n
	}
	// USER_HZ is 100 on every Linux this runs on.
	tick := 10 * time.Millisecond
	return machineTimes{
		busy:  time.Duration(v[0]+v[1]+v[2]+v[5]+v[6]) * tick,
		steal: time.Duration(v[7]) * tick,
	}, true
}

// cpuWindow reads the CPU counters as a measured window opens and closes.
type cpuWindow struct {
	load    string
	process [2]time.Duration
	total   [2]machineTimes
}

// mark reads the counters; open says which end of the window this is.
func (w *cpuWindow) mark(open bool) {
	i := 1
	if open {
		i, w.load = 0, loadAverage()
	}
	w.process[i], w.total[i] = cputime.Process(), machineCPU()
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
	if w.total[1].busy > 0 {
		p.MachineCPU = 100 * (w.total[1].busy - w.total[0].busy).Seconds() / p.Seconds
		p.StealCPU = 100 * (w.total[1].steal - w.total[0].steal).Seconds() / p.Seconds
	}
}
