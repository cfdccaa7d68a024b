// Command omega is the single binary of the omega cluster manager.
package main

import "github.com/omega-cell/omega/cli"

func main() { cli.Main() }
