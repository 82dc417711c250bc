package bench

// glyph returns the 5x7 bitmap of r (one byte per row, bit 4 leftmost).
// Lower case prints as upper case; a rune without a glyph prints as '?'.
func glyph(r rune) [7]uint8 {
	if r >= 'a' && r <= 'z' {
		r -= 'a' - 'A'
	}
	switch r {
	case ' ':
		return [7]uint8{}
	case '0':
		return [7]uint8{0b01110, 0b10001, 0b10011, 0b10101, 0b11001, 0b10001, 0b01110}
	case '1':
		return [7]uint8{0b00100, 0b01100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110}
	case '2':
		return [7]uint8{0b01110, 0b10001, 0b00001, 0b00010, 0b00100, 0b01000, 0b11111}
	case '3':
		return [7]uint8{0b11111, 0b00010, 0b00100, 0b00010, 0b00001, 0b10001, 0b01110}
	case '4':
		return [7]uint8{0b00010, 0b00110, 0b01010, 0b10010, 0b11111, 0b00010, 0b00010}
	case '5':
		return [7]uint8{0b11111, 0b10000, 0b11110, 0b00001, 0b00001, 0b10001, 0b01110}
	case '6':
		return [7]uint8{0b00110, 0b01000, 0b10000, 0b11110, 0b10001, 0b10001, 0b01110}
	case '7':
		return [7]uint8{0b11111, 0b00001, 0b00010, 0b00100, 0b01000, 0b01000, 0b01000}
	case '8':
		return [7]uint8{0b01110, 0b10001, 0b10001, 0b01110, 0b10001, 0b10001, 0b01110}
	case '9':
		return [7]uint8{0b01110, 0b10001, 0b10001, 0b01111, 0b00001, 0b00010, 0b01100}
	case 'A':
		return [7]uint8{0b01110, 0b10001, 0b10001, 0b11111, 0b10001, 0b10001, 0b10001}
	case 'B':
		return [7]uint8{0b11110, 0b10001, 0b10001, 0b11110, 0b10001, 0b10001, 0b11110}
	case 'C':
		return [7]uint8{0b01110, 0b10001, 0b10000, 0b10000, 0b10000, 0b10001, 0b01110}
	case 'D':
		return [7]uint8{0b11100, 0b10010, 0b10001, 0b10001, 0b10001, 0b10010, 0b11100}
	case 'E':
		return [7]uint8{0b11111, 0b10000, 0b10000, 0b11110, 0b10000, 0b10000, 0b11111}
	case 'F':
		return [7]uint8{0b11111, 0b10000, 0b10000, 0b11110, 0b10000, 0b10000, 0b10000}
	case 'G':
		return [7]uint8{0b01110, 0b10001, 0b10000, 0b10111, 0b10001, 0b10001, 0b01111}
	case 'H':
		return [7]uint8{0b10001, 0b10001, 0b10001, 0b11111, 0b10001, 0b10001, 0b10001}
	case 'I':
		return [7]uint8{0b01110, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110}
	case 'J':
		return [7]uint8{0b00111, 0b00010, 0b00010, 0b00010, 0b00010, 0b10010, 0b01100}
	case 'K':
		return [7]uint8{0b10001, 0b10010, 0b10100, 0b11000, 0b10100, 0b10010, 0b10001}
	case 'L':
		return [7]uint8{0b10000, 0b10000, 0b10000, 0b10000, 0b10000, 0b10000, 0b11111}
	case 'M':
		return [7]uint8{0b10001, 0b11011, 0b10101, 0b10101, 0b10001, 0b10001, 0b10001}
	case 'N':
		return [7]uint8{0b10001, 0b10001, 0b11001, 0b10101, 0b10011, 0b10001, 0b10001}
	case 'O':
		return [7]uint8{0b01110, 0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01110}
	case 'P':
		return [7]uint8{0b11110, 0b10001, 0b10001, 0b11110, 0b10000, 0b10000, 0b10000}
	case 'Q':
		return [7]uint8{0b01110, 0b10001, 0b10001, 0b10001, 0b10101, 0b10010, 0b01101}
	case 'R':
		return [7]uint8{0b11110, 0b10001, 0b10001, 0b11110, 0b10100, 0b10010, 0b10001}
	case 'S':
		return [7]uint8{0b01111, 0b10000, 0b10000, 0b01110, 0b00001, 0b00001, 0b11110}
	case 'T':
		return [7]uint8{0b11111, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100}
	case 'U':
		return [7]uint8{0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01110}
	case 'V':
		return [7]uint8{0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01010, 0b00100}
	case 'W':
		return [7]uint8{0b10001, 0b10001, 0b10001, 0b10101, 0b10101, 0b10101, 0b01010}
	case 'X':
		return [7]uint8{0b10001, 0b10001, 0b01010, 0b00100, 0b01010, 0b10001, 0b10001}
	case 'Y':
		return [7]uint8{0b10001, 0b10001, 0b10001, 0b01010, 0b00100, 0b00100, 0b00100}
	case 'Z':
		return [7]uint8{0b11111, 0b00001, 0b00010, 0b00100, 0b01000, 0b10000, 0b11111}
	case '.':
		return [7]uint8{0, 0, 0, 0, 0, 0b01100, 0b01100}
	case ',':
		return [7]uint8{0, 0, 0, 0, 0b01100, 0b00100, 0b01000}
	case ':':
		return [7]uint8{0, 0b01100, 0b01100, 0, 0b01100, 0b01100, 0}
	case '=':
		return [7]uint8{0, 0, 0b11111, 0, 0b11111, 0, 0}
	case '-':
		return [7]uint8{0, 0, 0, 0b11111, 0, 0, 0}
	case '+':
		return [7]uint8{0, 0b00100, 0b00100, 0b11111, 0b00100, 0b00100, 0}
	case '_':
		return [7]uint8{0, 0, 0, 0, 0, 0, 0b11111}
	case '/':
		return [7]uint8{0, 0b00001, 0b00010, 0b00100, 0b01000, 0b10000, 0}
	case '(':
		return [7]uint8{0b00010, 0b00100, 0b01000, 0b01000, 0b01000, 0b00100, 0b00010}
	case ')':
		return [7]uint8{0b01000, 0b00100, 0b00010, 0b00010, 0b00010, 0b00100, 0b01000}
	case '[':
		return [7]uint8{0b01110, 0b01000, 0b01000, 0b01000, 0b01000, 0b01000, 0b01110}
	case ']':
		return [7]uint8{0b01110, 0b00010, 0b00010, 0b00010, 0b00010, 0b00010, 0b01110}
	case '%':
		return [7]uint8{0b11000, 0b11001, 0b00010, 0b00100, 0b01000, 0b10011, 0b00011}
	case '<':
		return [7]uint8{0b00010, 0b00100, 0b01000, 0b10000, 0b01000, 0b00100, 0b00010}
	case '>':
		return [7]uint8{0b01000, 0b00100, 0b00010, 0b00001, 0b00010, 0b00100, 0b01000}
	case '*':
		return [7]uint8{0, 0b00100, 0b10101, 0b01110, 0b10101, 0b00100, 0}
	}
	return [7]uint8{0b01110, 0b10001, 0b00001, 0b00010, 0b00100, 0, 0b00100}
}
