# The table of make bench-remote: reads the go test -bench output of spill's remote benchmarks
# (spill/remote_bench_server_test.go) and prints, per benchmark, the tier's MB/s, its baseline's,
# their ratio against the tier's goal, the tier's time against the serial floor (the baseline's
# time and the same bytes' local framing added up; see reportFloor there), and the CPU both ways
# take per MB, client and server added up (cpuTotal.report), with the ratio they bound when the
# two share the machine's cores (ceiling: the baseline's CPU over the tier's).
/^BenchmarkRemote/ {
	name = $1; sub(/^Benchmark/, "", name); sub(/-[0-9]+$/, "", name)
	for (i = 5; i < NF; i += 2) v[name, $(i + 1)] = $i
	n++
}
function cpu(name, way) {
	if (!((name, way "-cpu-ms/MB") in v)) return -1
	return v[name, way "-cpu-ms/MB"] + v[name, way "-server-cpu-ms/MB"]
}
function row(name, what, base, ours, theirs, ratio, goal,    floor, local, c1, c2, cs, bs, ceil) {
	if (!((name, ratio) in v)) return
	floor = ((name, "spill/floor") in v) ? sprintf("%.2f", v[name, "spill/floor"]) : "-"
	local = ((name, "local-MB/s") in v) ? sprintf("%.1f", v[name, "local-MB/s"]) : "-"
	c1 = cpu(name, "spill"); c2 = cpu(name, "raw")
	cs = c1 < 0 ? "-" : sprintf("%.2f", c1); bs = c2 < 0 ? "-" : sprintf("%.2f", c2)
	ceil = (c1 > 0 && c2 >= 0) ? sprintf("%.2f", c2 / c1) : "-"
	printf "| %-13s | %-38s | %-30s | %7.1f | %7.1f | %5.2f | %s %-6s | %7s | %5s | %5s | %5s | %5s |\n", name, what, base, v[name, ours], v[name, theirs], v[name, ratio], goal, (v[name, ratio] + 0 >= substr(goal, 3) + 0 ? "met" : "missed"), local, floor, cs, bs, ceil
}
END {
	if (n == 0) { print "bench-remote: no benchmark line in the output" > "/dev/stderr"; exit 1 }
	printf "| %-13s | %-38s | %-30s | %7s | %7s | %5s | %-13s | %7s | %5s | %5s | %5s | %5s |\n", "benchmark", "Spillway", "baseline", "MB/s", "base", "ratio", "goal", "local", "floor", "cpu", "base cpu", "ceiling"
	print "| --- | --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |"
	row("RemoteWrite", "spill file written to the store", "PutObject of its stored bytes", "spill-MB/s", "raw-MB/s", "spill/raw", ">=0.80")
	row("RemoteRead", "spill file read in order", "GET of the whole object", "spill-MB/s", "raw-MB/s", "spill/raw", ">=0.80")
	row("RemoteMerge16", "16-run merge, 20 ms added a request", "the same merge, no delay", "slow-MB/s", "fast-MB/s", "slow/fast", ">=0.50")
}
