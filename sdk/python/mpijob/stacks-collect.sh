# mpijob's stack collector (kubectl mpijob stacks, the SDK's get_stacks, the
# dashboard's Stacks view, the diagnosis). It runs in a job's container as
# the job's user, with `sh -c`, and needs nothing the pod does not have:
# /proc, sh, awk, kill and sleep. For each MPI rank of the pod (a process
# with OMPI_COMM_WORLD_RANK, PMIX_RANK or PMI_RANK) it prints the process's
# state and CPU time and, when the process runs mpijob's stack hook
# (images/common/mpijob_stacks.py: it catches SIGUSR2 and holds its own
# $TMPDIR/mpijob-stacks/PID.txt open), the Python stack of each thread with
# each frame's source line. A process without the hook is never signalled:
# SIGUSR2 would end it.
d="${TMPDIR:-/tmp}/mpijob-stacks"
ranks=""
hooked=""
for p in /proc/[0-9]*; do
  pid=${p#/proc/}
  [ "$pid" = "$$" ] && continue
  rank=$(tr '\0' '\n' 2>/dev/null < "$p/environ" | awk -F= '$1=="OMPI_COMM_WORLD_RANK"||$1=="PMIX_RANK"||$1=="PMI_RANK"{print $2; exit}')
  [ -n "$rank" ] || continue
  ranks="$ranks $pid:$rank"
  mask=$(awk '$1=="SigCgt:"{print $2}' "$p/status" 2>/dev/null)
  low=${mask#"${mask%????}"}
  [ -n "$low" ] && [ $((0x$low & 0x800)) -ne 0 ] || continue
  for fd in "$p"/fd/*; do
    if [ "$(readlink "$fd" 2>/dev/null)" = "$d/$pid.txt" ]; then
      : > "$d/$pid.txt" && kill -USR2 "$pid" 2>/dev/null && hooked="$hooked $pid"
      break
    fi
  done
done
# The dumps are written in the signal handlers, side by side: wait until
# every file has stopped growing (at most about 3 s).
if [ -n "$hooked" ]; then
  last=""
  i=0
  while [ $i -lt 15 ]; do
    sleep 0.2
    now=""
    for pid in $hooked; do now="$now $(wc -c < "$d/$pid.txt" 2>/dev/null)"; done
    case " $now " in *" 0 "*) ;; *) [ "$now" = "$last" ] && break ;; esac
    last=$now
    i=$((i + 1))
  done
fi
for pr in $ranks; do
  pid=${pr%%:*}
  rank=${pr#*:}
  stat=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
  comm=${stat#*(}
  comm=${comm%)*}
  # shellcheck disable=SC2086
  set -- ${stat##*) }
  hook=0
  case " $hooked " in *" $pid "*) hook=1 ;; esac
  echo "@@process pid=$pid ppid=$2 rank=$rank state=$1 cpu_ticks=$(($12 + $13)) hook=$hook comm=$comm"
  if [ $hook = 1 ]; then
    awk '{ print }
      /^  File "/ {
        s = $0; sub(/^  File "/, "", s)
        path = s; sub(/", line [0-9]+ in .*$/, "", path)
        n = s; sub(/^.*", line /, "", n); sub(/ in .*$/, "", n)
        key = path ":" n
        if (key in seen) next
        seen[key] = 1; i = 0; text = ""
        while ((getline l < path) > 0) { i++; if (i == n + 0) { text = l; break } }
        close(path)
        gsub(/^[ \t]+|[ \t\r]+$/, "", text)
        if (text != "") src[++m] = key "\t" text
      }
      END { for (j = 1; j <= m; j++) print "@@source " src[j] }' "$d/$pid.txt"
  fi
  echo "@@end"
done
exit 0
