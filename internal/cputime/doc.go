// Package cputime reads the CPU time the whole process has used, so that
// the bench tool and the benchmarks report CPU per request, which on a
// CPU-bound host bounds throughput, the same way.
package cputime
