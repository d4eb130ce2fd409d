module github.com/ilbgo/ilb

go 1.26.0

require (
	github.com/coreos/go-systemd/v22 v22.7.0
	github.com/gopacket/gopacket v1.7.7
	github.com/safchain/ethtool v0.7.0
	github.com/urfave/cli/v2 v2.27.7
	github.com/vishvananda/netlink v1.3.1
	github.com/vishvananda/netns v0.0.5
	golang.org/x/crypto v0.59.0
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/cpuguy83/go-md2man/v2 v2.0.7 // indirect
	github.com/russross/blackfriday/v2 v2.1.0 // indirect
	github.com/xrash/smetrics v0.0.0-20240521201337-686a1a2994c1 // indirect
)

tool github.com/cpuguy83/go-md2man/v2
