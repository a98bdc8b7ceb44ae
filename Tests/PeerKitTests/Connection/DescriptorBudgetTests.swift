#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Testing
@testable import PeerKit

@Suite("Descriptor budget")
struct DescriptorBudgetTests {
    /// Runs `body` with a directory entry whose name (`name`, then its terminating zero) ends
    /// exactly where a page that cannot be read begins, as a short record at the end of
    /// `readdir`'s buffer can: reading one byte past the name's zero crashes.
    func withEntryEndingAtAGuardPage<T>(named name: String, _ body: (UnsafePointer<dirent>) -> T) throws -> T {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let mapped = mmap(nil, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        let mapping = try #require(mapped.flatMap { $0 == UnsafeMutableRawPointer(bitPattern: -1) ? nil : $0 },
                                   "mmap of two pages failed (errno \(errno))")
        defer { munmap(mapping, 2 * page) }
        try #require(mprotect(mapping + page, page, PROT_NONE) == 0, "the guard page could not be protected (errno \(errno))")
        let nameOffset = try #require(MemoryLayout<dirent>.offset(of: \.d_name))
        let bytes = Array(name.utf8) + [0]
        (mapping + page - bytes.count).copyMemory(from: bytes, byteCount: bytes.count)
        let entry = mapping + page - bytes.count - nameOffset
        return body(UnsafePointer(entry.assumingMemoryBound(to: dirent.self)))
    }

    @Test("\".\" and \"..\" are told from descriptors' names, reading no byte past a name's end")
    func dotEntries() throws {
        // Before, the whole 256-byte d_name was copied: each of these crashed on the guard page.
        #expect(try withEntryEndingAtAGuardPage(named: ".", DescriptorBudget.isDotOrDotDot))
        #expect(try withEntryEndingAtAGuardPage(named: "..", DescriptorBudget.isDotOrDotDot))
        #expect(try !withEntryEndingAtAGuardPage(named: "7", DescriptorBudget.isDotOrDotDot))
        #expect(try !withEntryEndingAtAGuardPage(named: ".7", DescriptorBudget.isDotOrDotDot))
        #expect(try !withEntryEndingAtAGuardPage(named: "...", DescriptorBudget.isDotOrDotDot))
        #expect(try !withEntryEndingAtAGuardPage(named: "1024", DescriptorBudget.isDotOrDotDot))
    }

    @Test("the process's budget counts its open descriptors, without \".\" and \"..\"")
    func currentBudget() throws {
        let budget = try #require(DescriptorBudget.current(), "the descriptor limit is unlimited or unreadable here")
        // At least stdin, stdout and stderr are open; far fewer than the limit.
        #expect(budget.open >= 3)
        #expect(budget.open < budget.limit)
    }
}
