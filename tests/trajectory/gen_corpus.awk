# A deterministic text corpus for the trajectory test: 4000 "documents" of
# words drawn by a fixed Park-Miller generator (exact in awk's
# doubles: every product stays below 2^46), so the token stream is the
# same on every machine and needs no corpus package.
BEGIN {
  split("the of and to in a is that for it as was with be by on not he this are or his from at which but have an they you were her she there been one all we their has would when if so no what up out who them some could into its more than then these two may first any like now my other such only over new time very after most made also did many before must through back years where much your way well down should because each just those people how too little state good very make world still own see men work long get here between both life being under never day same another know while last might us great old year off come since against go came right used take three", W, " ")
  nw = length(W); s = 20261202
  for (d = 0; d < 4000; d++) {
    s = (s * 16807) % 2147483647; n = 5 + int(s / 2147483647 * 25)
    line = ""
    for (i = 0; i < n; i++) {
      s = (s * 16807) % 2147483647
      line = line (i ? " " : "") W[1 + int(s / 2147483647 * nw)]
    }
    printf "%s.\n%%\n", line
  }
}
