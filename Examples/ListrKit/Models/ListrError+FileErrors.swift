import Foundation

extension ListrError {
    /// A Foundation file error as a short clause for a sentence, e.g. "no such file" or
    /// "permission denied".
    public static func reason(forFileError error: any Error) -> String {
        switch error {
        case CocoaError.fileReadNoSuchFile, CocoaError.fileNoSuchFile:
            return "no such file"
        case CocoaError.fileReadNoPermission, CocoaError.fileWriteNoPermission:
            return "permission denied"
        case CocoaError.fileWriteOutOfSpace:
            return "the disk is full"
        default:
            break
        }
        var isFolder: ObjCBool = false
        if let path = (error as? CocoaError)?.filePath,
           FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue {
            return "it is a folder"
        }
        if let underlying = (error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError,
           underlying.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(underlying.code))).lowercased()
        }
        let text = error.localizedDescription
        return text.hasSuffix(".") ? String(text.dropLast()) : text
    }
}
