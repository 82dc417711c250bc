// Command aokeyd is the router-side TCP-AO key rotation daemon.
//
//	aokeyd [-config /etc/aokeyd/aokeyd.yaml] [-state-dir /var/lib/aokeyd]
//	aokeyd init [-dir /etc/aokeyd] [-force]
//	                                     write the embedded first-run config, policy and demo keys
//	                                     (refused when any of them exists; -force keeps FILE.bak)
//	aokeyd exec [-socket PATH] -- gobgpd -f /etc/gobgpd.conf
//	                                     run gobgpd so that its connects and listeners carry TCP-AO keys
//	                                     (aokeyd -connectguard PATH answers them; see package connectguard)
//	aokeyd version                      (also -version, --version)
//	aokeyd help                         the commands and flags (also -h, -help, --help)
//
// Any other argument is refused (exit status 2) and never starts the
// daemon, which takes flags only.
//
// It reads Master Key Tuples from Vault or a YAML file, puts them on the
// BGP speaker's sockets (gobgpd, found through its gRPC API and its
// process), rolls them by the policy without dropping a session, and serves
// aoctl on a unix socket. SIGHUP reloads the configuration after validating
// it (a bad reload is refused and the running one kept): the policy and the
// log level apply at once, every other changed setting on restart, named in
// a log line and a status warning meanwhile; SIGTERM stops the daemon
// and leaves every installed key in place. With systemd it reports
// readiness through $NOTIFY_SOCKET (Type=notify); in the foreground it needs
// nothing.
package main
