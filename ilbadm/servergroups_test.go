package main

import "testing"

// remove-server takes server IDs (Solaris' code) and, as the manual documents (spec
// policy 2), addresses of the group's servers.
func TestRemoveServerByAddress(t *testing.T) {
	sock := daemon(t)
	runSteps(t, sock, []step{
		{line: "create-servergroup -s server=192.0.2.11,192.0.2.12,192.0.2.13 sg"},
		{line: "create-servergroup -s server=[2001:db8::1],[2001:db8::2] sg6"},
		{line: "remove-server -s server=192.0.2.12,_sg.2 sg"},
		{line: "remove-server -s server=[2001:db8::1] sg6"},
		{line: "remove-srv -s server=2001:db8::2 sg6"},
		// Unknown address, or another group's server: the group has no such server.
		{line: "remove-server -s server=192.0.2.99 sg", status: 1,
			stderr: "ilbadm: cannot remove 192.0.2.99 from sg: cannot find specified server\n"},
		{line: "remove-server -s server=192.0.2.11 sg6", status: 1,
			stderr: "ilbadm: cannot remove 192.0.2.11 from sg6: cannot find specified server\n"},
		// Neither an ID nor an address or host name: Solaris' message.
		{line: "remove-server -s server=a/b sg", status: 1, stderr: "ilbadm: server: server ID is invalid\n"},
		{line: "remove-server -s servers=_sg.0 sg", status: 1, stderr: "ilbadm: bad keyword servers\n"},
		{line: "show-sg", stdout: `SGNAME         SERVERID            MINPORT MAXPORT IP_ADDRESS
sg             _sg.0               --      --      192.0.2.11
sg6            --                  --      --      --
`},
	})
}
