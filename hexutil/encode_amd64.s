//go:build !purego

#include "textflag.h"

// func encodeBlocks(dst, src *byte, n int)
//
// Sixteen bytes a step, in SSE2 (which every amd64 processor has): split
// each byte into its two nibbles, interleave them in output order, add '0',
// and add 'a'-'0'-10 more where the digit went past '9'.
TEXT ·encodeBlocks(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	TESTQ CX, CX
	JZ   done

	MOVQ       $0x0f0f0f0f0f0f0f0f, AX
	MOVQ       AX, X8
	PUNPCKLQDQ X8, X8 // the nibble mask
	MOVQ       $0x3030303030303030, AX
	MOVQ       AX, X9
	PUNPCKLQDQ X9, X9 // '0'
	MOVQ       $0x3939393939393939, AX
	MOVQ       AX, X10
	PUNPCKLQDQ X10, X10 // '9'
	MOVQ       $0x2727272727272727, AX
	MOVQ       AX, X11
	PUNPCKLQDQ X11, X11 // 'a'-'0'-10

loop:
	MOVOU (SI), X0
	MOVO  X0, X1
	PSRLW $4, X1
	PAND  X8, X1 // high nibbles
	PAND  X8, X0 // low nibbles
	MOVO  X1, X2
	PUNPCKLBW X0, X1 // bytes 0-7: high, low, high, low, ...
	PUNPCKHBW X0, X2 // bytes 8-15

	PADDB   X9, X1
	MOVO    X1, X3
	PCMPGTB X10, X3
	PAND    X11, X3
	PADDB   X3, X1

	PADDB   X9, X2
	MOVO    X2, X4
	PCMPGTB X10, X4
	PAND    X11, X4
	PADDB   X4, X2

	MOVOU X1, (DI)
	MOVOU X2, 16(DI)
	ADDQ  $16, SI
	ADDQ  $32, DI
	SUBQ  $16, CX
	JNZ   loop

done:
	RET
