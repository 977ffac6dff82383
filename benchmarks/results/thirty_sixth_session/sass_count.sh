# SASS instruction histogram of a cubin's kernel (name regex): bash sass_count.sh file.cubin regex
cuobjdump -sass "$1" | awk -v re="$2" '/Function :/ {on = ($0 ~ re)} on && /\/\*[0-9a-f]+\*\// {for (i=1;i<=NF;i++) if ($i ~ /^[A-Z][A-Z0-9_.]+$/ && $i != "@P0") {split($i, p, "."); print p[1]; break}}' | sort | uniq -c | sort -rn | head -25
