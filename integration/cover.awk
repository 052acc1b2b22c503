# Summarises a Go cover profile per package. With -coverpkg every test
# binary reports every block, so a block counts as covered when any did.
NR == 1 { next }
{
	key = $1; stmts[key] = $2
	if ($3 > 0) hit[key] = 1
}
END {
	for (k in stmts) {
		file = k; sub(/:.*/, "", file)
		pkg = file; sub(/\/[^\/]*$/, "", pkg)
		total[pkg] += stmts[k]
		if (k in hit) covered[pkg] += stmts[k]
	}
	n = 0
	for (p in total) names[++n] = p
	# insertion sort: awk has no portable sort
	for (i = 2; i <= n; i++) { v = names[i]; j = i - 1; while (j > 0 && names[j] > v) { names[j+1] = names[j]; j-- }; names[j+1] = v }
	for (i = 1; i <= n; i++) { p = names[i]; all += total[p]; allc += covered[p]
		printf "coverage: %-50s %5.1f%% of %d statements\n", p, 100 * covered[p] / total[p], total[p] }
	printf "coverage: %-50s %5.1f%% of %d statements\n", "total", 100 * allc / all, all
}
