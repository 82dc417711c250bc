#!/bin/sh
# Run by the field image's aokeyd-field.service (integration/vm/build.sh)
# at every boot, from the run's share: runs the scenario from the
# checkout with the share's binaries in PATH, and powers the guest off
# when the scenario says it is done (or failed). A reboot the scenario
# asks for comes back here.
export PATH=/aokeyd/share/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/bin
export HOME=/root AOKEYD_GUEST_KERNEL=1 FIELD_SHARE=/aokeyd/share FIELD_SRC=/aokeyd/src
bash /aokeyd/src/integration/field/scenario.sh</dev/null >>/aokeyd/share/logs/scenario.log 2>&1
rc=$?
case $rc in
100) systemctl reboot; exit 0 ;; # the scenario's reboot event
esac
echo $rc >/aokeyd/share/results/scenario
journalctl -b --no-pager -o short-monotonic >/aokeyd/share/logs/journal.txt 2>&1
sync
systemctl poweroff
