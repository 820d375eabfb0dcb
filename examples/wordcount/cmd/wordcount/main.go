// Command wordcount is a program that carries its own job: it runs
// wordcount here (wordcount run wordcount -- --input DIR --output DIR), or
// as every role of a cluster (jobmanager, taskmanager, run -m ADDR).
package main

import (
	"github.com/weirstream/weir"
	"github.com/weirstream/weir/examples/wordcount"
)

func main() { weir.Main(wordcount.Job()) }
