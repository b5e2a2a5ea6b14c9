"""English words for made-up names (`mens generate-data --english-names`): `lines_capture`,
`ModeTable` — names a small model cannot predict from the request's domain either, but that look
like the names users ask for (`crates_needed`), unlike the syllables of `pseudo_name`.

The list: the 2,500 most frequent lowercase words of 3-9 letters in the docstrings of Python
3.11's standard library (`Lib/*.py`), minus the reserved words (`words.RESERVED`) and minus every
word of every identifier in the held-out bench (`examples/bench`: prompts, needles, references),
so no bench name is ever a training name (docs/performance.md, "Two processes on two cores").
A few entries are not words (contractions cut at the apostrophe, `doesn`; the rot13 of `this.py`);
they are kept as they are: any made-up name serves, and the measured runs used this very list.
"""

ENGLISH_WORDS: tuple[str, ...] = tuple("""
object are line will number can used argument turtle which bytes instance method arguments set def
may command use mode filename have tuple values current returned lines objects encoding sys you
directory but exception called files stack arg methods raise specified names like args output stream
also strings was format case context socket thread defined user last classes try raised source
position sequence end defaults frame byte order print types most does available standard response
following been binary there attribute they next second dict instead copy header mailbox keyword
contents operand system operation doesn errors close port provided member both modules process
possible always level buffer these newline cannot run protocol prefix base flags timeout such
already attrs their support variable created writing inspect flag local contains options join
extension raw program specific see pickle variables repr lineno statement part being interface
instances subclass different entry callable sequences special create way msg written stdout pos
request traverse items provides doctest doc title numbers mapping about make another calling
traceback results keys point members added namespace opened through exist them push canvas foo even
root positive globals multiple yield width locale decimal examples exponent including group would
thing token sign supported want bit internal obj access python how digits fill just global according
generic equal signature pair old event space original long threads messages syntax mean character
readline specifies within common cls closed directly present useful contain itself generator
abstract round info elements commands network elif bound done fields usage absolute don ignore
boolean runtime typ once need exit relative details angle stderr audio cache ignored necessary
iterable executed entries handle supports tuples integers hash parser memo opcode precision platform
offset endian chunk escape docstring heap stdin iterator regular three omitted replace occurs place
readable indicates matching raises tar trace were month valid pathname those compare enum shape isn
because arbitrary similar simple wrapped strict html lock datetime here stop locals decode printed
actual supplied addresses encoded rounding work currently total events taken temporary cases compile
helper reserved err override password back caller provide very expected spaces trailing bits week
least down recent running main sample kwargs abc complex nodes allowed means search imported removed
creating takes invalid exactly split callback divide little power pen content what day formatted dir
changes normal tell failure child topmost release mouse fillcolor well include full window converted
reference complete numeric param wrapper leading builtin lnum better typing globs during possibly
browser extended func zip parent algorithm maximum passing attr realname junk polygon fun pencolor
curframe parse resulting starting bar pairs usually condition sets unique remove compiled prints
exact sorted mod operands abcd delay forward specify setting seek etc packages keyed could registry
unchanged fileobj adds final public prompt off blocking memory dis direction quantize exp utf
changed hostname allow various actually headers display tab control disk every treated avoid aliases
queue blocks modname fullname words diff circle behavior beginning cause update note netmask gives
span decoded predicate hasattr bases static argspec cmd compute speed symbol failed drawing mydata
around stat still made stored gzip element working accepted alias pyc execution indent normally
pointer strip encode blank parts auto xff getattr finite unsigned verbose threading opcodes checker
argv filenames iff addition starts depending nothing debugger occurred extra suffix inherited
manager known able newlines exc appear pydoc enc allows selector dataclass reset debugging platforms
systems location fail src needs scope determine separator double lower handler vars human remainder
indents ratio accept much requires literal variance distance graphics symbolic safe several move
under previous generate outside suitable though separate limit document mark max report tabs rounded
four parsing filters checkers makes deleted assumed depends checked won own remote dst look step
canonical meaning larger included library embedded txt linear quoted codec timezone chunks dummy
assigned dot fit docloc median bin timer waiting runner outline rather nor works real searched fails
custom keep longer multi signals ending setup buffering val quiet intended nested chain expanded
private performed triple abs reported buffered identical smallest apply markup funcs entire slice
prec metaclass template feature ndiff formats tries appended builtins mapped symlink typically
environ status upon plist dumps printing weekday digest best produces related big reverse smaller
generally del produced sure localhost href mro wait floating division compared invoked alphabet
replaced together selected attempt www efficient symlinks greater active includes inputs indicate
contained runs bytecode compiler good handled checking hex yields displayed correct versions dotted
logical coroutine session setpos quote really exits decoding represent shutdown others providing
defines importlib forceload popped consists infinite nonzero failures acquired pensize responses
comments legacy connect might device enable yet super plain general desired reached eval writable
simply service ends hand controls something channels creation timedelta sep codecs decoder parents
sockets received mail tty spec getdoc modpkgs detail faster sqrt digit warnings debug delta shapes
colormode appending groups dicts lib along enabled com rest dependent describe connected hit
bytearray calendar tried charset shared take drive longest networks large padded finally accepts
frequency endpats nearest multiply obtained buffers streams pickled probably suffixes classname
maybe hashable thisclass keywords things rules blue paragraph min shift vector handles printable
onto orelse daemon colgroup drawn hardware further disabled skip unicode metadata servers checks
reasons separated mailcap appears high owner occur free debugged entered counted sub outputs columns
tmp commonly pointing pre executing fixed discarded head upper iana caught modified quotes having
alive wraps records pid delimiter often clean steps wrapping construct nbsp scheme forms units
compound modulo attempted rotate signed timeit cooked actions visitor marks degrees curindex listed
mixed fileno quit wrap extracted pth making var uid maps requested copying trying breaks latter
again years hashlib mtime usable prevent refer future processed detailed captured follow force
broken allocated null ints operators contstr half subtract had select follows opener encoder zipfile
record structure mechanism seen factory docdata testrepr decl bold pager intercept numerator
container concrete world inf hold pretty seq init decorated didn alpha visit graph pipeline testmod
turtles undo clicked drawings joe stamp overload iteration retrieved silently execute browsers
copied basename semantics archives gets pdb tracing basic timestamp tempfile mkstemp operating
allowing applied parsed tested loaded stripped however extract packed sense specifier notation mask
replacing suppress implicit attempts dev updated sampling aifc setparams patch col consumed contline
spos remaining dest requests magic purposes listen pickling higher keyfile certfile email know decor
classlink ftp cdict topics center acquire deviation getopt become traps signaling inexact subnormal
zeros reason shallow normalize hard prior restore replaces pushed frozen warning subtype handshake
channel recursion barrier wheel movement num logo shapesize tilt dirpath dirnames opening perhaps
post overview reader neither prefixes gid fast variant caused certain dispatch stops exec ones days
matrix backward adding switch thus category compiles ways looked refers truncated orggre guna small
scripts config levels rewind samples startline continued rstrip epos chars adjusted routines garbage
timing modes chosen legal newly unlike seeking lzma dirs hierarchy turn folder visible modify
preformat sections spill homecls bug imclass desc div align intervals pvariance slope fractions
minimum noise sigma yielded got ctx divmod features virtual defining tarinfo bottom preset functools
remain box marker literally pydict priority invariant producing extent pixels animation rational
killed accessed therefore sometimes fall third cfg home copyright thousands hook invoke web copies
patterns rename finished across counts happen act evaluated dump floats cell calculate triples
routine taking portable users idea ordinary problems nbytes alternate looking few fully slashes
bitwise ffff await pushes correctly later released universal sysconfig notice unusable tokenize
regex tabsize toknum tokval behaviour problem prog readonly terms tracer leave ignoring endings
indicated whence far usual although piece bad mem abcde protocols cycles locked greeting mbox cur
schemes docs indented isclass isroutine docother shadowed fdict ispkg topic matched major interval
colon quite literals purpose derive infinity logb expressed uname important doing comma escapes
anyobject identify blanks finder dirname deal varargs varkw framework semaphore builddate recipient
dbm drwxr pprint math binascii gif corner height dialog arrow pendown jump beta moved remains lang
begin username away cached skipped spam effective security lowercase readinto aren slash care
quitting bplist lots tables hashing truncate tempdir safely exceeds setlocale encodings grouping
emulate accesses optimize releases pep traces shorthand yielding shown ipaddress addr hostmask
converts multicast ranges loopback sending dynamic mutable destroyed seekable programs tells iso
capture endmatch come nargs metavar sources east tzinfo attached placed overrides heuristic isatty
issued satisfy passes minimal writer comment subset resolve mutated qualified disable remembers
detected assuming due meta classic changing happens escaped uniformly machinery ext formatter
ismodule maxstring cram rfc white getmodule importer needone mdict anchor skipdocs maxlen whatever
inc nonlocal texts pty fnmatch average odd assume leaving dig largest integral excluding fma
simplest scaleb pad proxy period initially timed reduce inserted processor building boxes pylist
pops telnet abort binding ast compact sound profiler reentrant unlocked guard prepare sendmail helo
properly sensitive bunch clone heappop winner consumes keepends linejunk ore focus oriented bgcolor
dist onclick goto radians noresize shear tiltangle six kwds newframe quotation logging multipart
nextfile presence backup encrypted portion usr perform duplicate hint fork sendfile onerror issues
compress unpack installed plistlib dates shot implied generates closing account likely writes
ambiguous tail gur zone resets contexts triggered pow echo reflect tools pure prepended sizes
indices pop latin parenlev strstart argparse perror finalizer strftime utcoffset minute consider
exclusive policy lead applies kept undefined imply moment put translate decide letter enter
posixpath incoming proto meets octets delimited offsets insofar respect getstate markers choice
basedir stdlib utilities grey filelink pkgutil pkg rule chop pipepager getset symbols parsers
wildcards speeds assumes seed origin frozenset soon couldn filling edge grammar overflow underflow
trapped near places computing computed ordering natural logarithm closest bounded almost mix prepend
tarfile inner processes callables direct relevant uabcd supposed annotate cleared blocked interact
twice limits login meth thereof install obtain refused multiline begins guess guessed driven
summarize transfer computer reports notion bcde diffs charjunk unittest mortem dircmp draw mainloop
cond rightmost course narrowing covariant uniform topdown strictly articles decodes sock netrc
operate archiving copytree pack unpacked invoking stopping former apple pages hexdigest similarly
worth low candidate someone proper exiting aliasing engine behaves aware lets knowledge differs
linecache segment depth shouldn sorting prefixlen easily say failing hextets cgitb displays nice
callbacks makefile distutils crypt iter mimics needcont endprog measure mappings weak owned atexit
unary ordinal formal west eggs reachable please treat inherit pipes advancing beyond flush arcname
domain reused pickler band locks restores enclosed preceded malformed unset setstate primarily
backslash synopsis unused onwards examined util docmodule docclass maxother stripid colspan namelink
believe isbuiltin classlist author spilldata unbound unlink ismethod utility renderer substring
openpty multimode stdev dataset cut xbar exhausted depend opt letters recognize prefixed exports baz
fits textwrap consist solely bounds neginf conform dividend explicit sin shifted differ compares
affected validate unrelated caches tape holds pax border sparse filtered imports hide executes
retained naming saves maxsize distinct inserts inferred popular nearly rights const rargs benefit
largs mainly populate fact matter quadratic onward pyset optimized argtuple unpickler ctypes finders
referring located repeated hack monitored telnetlib midst terminate retrieve anywhere cycle duck
ordered alert meant yourself delimit deco aiff slots settrace awakened ever smtp shelve bsddb
anonymous snapshot delim deals heappush indexing worst prevents branch revision friendly synch
adjacent readlines ugly ntwo nthree ntree fromlines tolines collect doctests stuff mostly segments
blah shebang moves clockwise press angles north btn picname mypen penup yellow black stamps
recording vertices startx starty repeats breaklist begidx endidx profiling spent waits cmdloop
unions fwalk completer stripdir quickly isstdin iterated nntplib subs turned rarely stripping
wildcard chmod precedes sitedir inclusion prompts codes viewing trees syscall copystat glob pointed
recreated brackets says funcname hello xml array calendars weeks slightly despite affect altered
inline worry simulates trivial deleting did cmp monetary maintain compiling managing peps goes
summaries nesting arire vqrn hosts subnet supernet octet entering agen resumes archs arch helpful
mono stereo getparams getmark patched designed came sig outer endswith collector evaluates dead
derives fold mmmmmm purely coverage infile outfile choose opens implies permitted linesep intent
suite reaches writeable ensures layer advance physical writestr existence connects bufsize conn
selects retr noop rset consume deletion ssl quotechar wins approach subpath delivery epoch helpers
slot fresh causes core partially think getdocloc posix zipimport prelude meet reallink removing
synop makename dumb proc hasn getchar locate plaintext merged searches serving monitor sleep css
slave grouped discrete fraction weights sized estimate equals percent argtypes flattened redefine
helps meanings software wants aspects expansion hyphens goof ball apart customize joined wikipedia
wiki familiar formed equality product scale numerical rotated roots closer reduces rotation
guarantee aligned acts filled char hardlink submodule combined measuring avoids overhead applying
abcs seem difficult optparse promote destroy brief ablah bboo matters leftover abcdef xea xaf
roundtrip identity intact grab extends transport retains parties why wink logic indicator proceed
regexes variants bitmap poll selection past eof intrinsic flow lazy safety preceding five transform
overall envelope quota performs notified validated tls peers lookups inter traverser targets recurse
owns decrement manage wake enumerate bos rte aix trunc maximal ndigits modulus union progress
manages smtplib rcpt challenge mime fine shelf anitem writeback sync scheduler presented expect
blocksize converter proxies preserves late valueless templates likewise turns cells heaps sorts
storing deltas fancy isjunk alo blo leftmost kwlist intraline nemu emu marking lineterm pulls jumps
vice versa mdiff precede combining completes ellipsis inspects spammish turning serve toolkit
invisible polyitem covered minval maxval poly shapename clicking nopic bgpic vec arc thickness mick
tangent parallel pet bye finish declared annotated pstring bpnumber countstr lastcmd rmdir nonempty
exitmsg risk stub overloads gamma lambd initlog sentinel forking locating fileinput openhook closes
fileline filtering inplace rewrites comp compliant posting newsgroup ids anyway hdr newest describes
inspected pyvenv suppose bletch mentioned automatic combine credits cast history unsafe launching
unpacking fsrc resembles exclude listdir cross renames lot gztar bztar xztar unpacker unable queried
querying facility originate going trap enabling deletes directs booleans gunk dtd cal centered handy
composite digestmod hmac updating feed lacks essential fastest slowest race mktemp mkdtemp temp
queries envvars gettext intimate cfile nature knows detecting pseudo oldest opposite deferred
rendered involved stating wide captures held pathnames manner ntpath fubhyq boivbhf jnl znl rkcynva
collapsed wish arpa zeroes increased decreased hextet teredo logdir managers aclose proceeds fname
unwind stand pathsep isysroot detection strongest license wave compat tok numchars hence scan stmt
weakly anymore getting enclosing associate collected radd isoformat proleptic tzname timespec
replies eastward consult utc coverdir plausible hits positions emits closefd falling loss varies
vary omitting typical detached mixin central zlib exceed namelist dots pathlib wishes retain fromfd
fromshare dup transmit opposed figure fds maxfds copyreg picklers belong equally capa unlock mesgnum
getpass csv dialect probable goal evaluate intensive lockf locking ensuring mal lemburg situation
baseclass rescan recover huge greedy strategy task rng syntaxes documents browse van series splitext
errno imp marshal maxlist maxtuple maxdict extras ispackage selfdot urllib isdata pump deque getmro
popleft truly lhs getpager emacs ttypager hereby rfind writedoc pkgpath easier commented starttime
monotonic nicely enhanced alone scanning languages averages fmean spread pstdev relations avoided
harmonic ratios car travels midpoints ten person nominal occurring quartiles deciles cuts valued
measures estimated density pdf variances
""".split())
